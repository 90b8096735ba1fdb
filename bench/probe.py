#!/usr/bin/env python3
"""Adversarial probe of mpbench's command-line contract, kept apart from the unit tests.

    python3 bench/probe.py --mpbench build/mpbench [--quick] [--keep] [--only CLASS,...]

Every case runs one mpbench command in a fresh temporary directory (sequentially, with a timeout)
and checks the contract the README states:

- never killed by a signal, never a hang, exit code in {0, 1, 2, 3, 4};
- exit 2 (bad input): exactly one line on stderr, at most 2000 bytes, printable (no raw controls,
  U+2028/2029, bidi, zero-width or BOM characters), naming the offending file/option/JSON path,
  nothing on stdout, nothing created or changed in the case's directory, before any training
  (fast, no progress lines);
- inputs are never modified, symlinks stay symlinks, no FILE.tmp.PID is left behind;
- what `run --json` and `profile --json` write, `compare A A` and `report A [P] --html X` accept;
- bad input that the README says is refused is refused, and validate agrees with run.

Expectations marked "soft" are the probe's reading where the README states no explicit rule: a
miss there is listed as an observation, not a defect. Every child runs with RLIMIT_AS = 6 GiB
(a safety net on a small shared machine; a refusal to allocate should be exit 3, not a crash).
"""
import argparse
import copy
import hashlib
import re
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata

FAST_S = 5.0          # a refusal must come before any training: well under this
TIMEOUT_S = 60
AS_LIMIT = 6 << 30
DEL = object()        # sentinel: delete the key

# Characters an error line must not carry raw (README: controls, U+2028/2029, bidi, zero-width, BOM).
BAD_CHARS = ({0x2028, 0x2029, 0xFEFF, 0x061C, 0x180E, 0x00AD} | set(range(0x200B, 0x2010)) |
             set(range(0x202A, 0x202F)) | set(range(0x2060, 0x2065)) | set(range(0x2066, 0x206A)))


def text_problems(b, what='stderr'):
    """(hard, soft) problems of a line that must be printable."""
    try:
        s = b.decode('utf-8')
    except UnicodeDecodeError as e:
        return [f'{what} is not valid UTF-8 ({e.reason} at byte {e.start})'], []
    if s.endswith('\n'):
        s = s[:-1]
    hard, soft = [], []
    for ch in s:
        o = ord(ch)
        cat = unicodedata.category(ch)
        if cat in ('Cc', 'Zl', 'Zp', 'Cs') or o in BAD_CHARS:
            hard.append(f'{what} holds a raw U+{o:04X} ({cat})')
            break
        if cat == 'Cf':
            soft.append(f'{what} holds a raw format character U+{o:04X}')
            break
        if cat == 'Cn':
            soft.append(f'{what} holds a raw unassigned code point U+{o:04X} (Python {unicodedata.unidata_version})')
            break
    return hard, soft


def sha(path):
    h = hashlib.sha1()
    with open(path, 'rb') as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def snap(root):
    """Every entry under root, not following links: kind, link target, size+hash+mode."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ('link', os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ('file', st.st_size, sha(p), stat.S_IMODE(st.st_mode))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ('dir',)
            else:
                out[rel] = ('other', stat.S_IFMT(st.st_mode))
    return out


def setp(obj, path, val):
    """Copy of obj with path (tuple of keys/indices) set to val (DEL deletes)."""
    obj = copy.deepcopy(obj)
    cur = obj
    for k in path[:-1]:
        cur = cur[k]
    if val is DEL:
        del cur[path[-1]]
    else:
        cur[path[-1]] = val
    return obj


def jpath(path):
    s = ''
    for k in path:
        s += f'[{k}]' if isinstance(k, int) else ('.' if s else '') + k
    return s


def nest(depth, inner='1', o='[', c=']'):
    return o * depth + inner + c * depth


def deep_text(obj, path, text):
    """JSON text of obj with the value at path replaced by raw text."""
    return json.dumps(setp(obj, path, '__PROBE_RAW__')).replace('"__PROBE_RAW__"', text, 1)


def idx_images(n, rows, cols, magic=0x803, pixels=None, count=None):
    count = n if count is None else count
    body = bytes((i * 7) & 0xFF for i in range(n * rows * cols)) if pixels is None else pixels
    return struct.pack('>IIII', magic, count, rows, cols) + body


def idx_labels(n, k=4, magic=0x801, labels=None, count=None):
    count = n if count is None else count
    body = bytes(i % k for i in range(n)) if labels is None else labels
    return struct.pack('>II', magic, count) + body


class Result:
    def __init__(self, rc, out, err, elapsed, timed_out, signame):
        self.rc, self.out, self.err, self.elapsed = rc, out, err, elapsed
        self.timed_out, self.signame = timed_out, signame

    @property
    def errs(self):
        return self.err.decode('utf-8', 'replace')


class Probe:
    def __init__(self, mpbench, quick, keep, only):
        self.mp = os.path.abspath(mpbench)
        self.quick, self.keep = quick, keep
        self.only = set(only.split(',')) if only else None
        self.root = tempfile.mkdtemp(prefix='mpbench-probe-')
        self.S = os.path.join(self.root, 'shared')
        os.mkdir(self.S)
        self.n = 0
        self.held = 0
        self.defects = []
        self.observations = []
        self.skipped = []
        self.shared_snap = None
        self.per_class = {}

    # ------------------------------------------------------------------ running one case
    def want(self, cls):
        return self.only is None or cls in self.only or cls == 'fixture'

    def show(self, argv, cwd):
        parts = []
        for a in argv:
            a = os.fsencode(a) if isinstance(a, str) else a
            a = a.decode('utf-8', 'backslashreplace')
            parts.append(a.replace(self.root, '$T'))
        s = shlex.join(parts)
        if len(s) > 400:
            s = s[:400] + f'... ({len(s)} chars)'
        return f'(cd {cwd.replace(self.root, "$T")} && {s})'

    def case(self, cls, name, args, expect='any', names=(), setup=None, outputs=(), check=None,
             timeout=TIMEOUT_S, soft=False, cwd=None, stdout_mode=None, rmcwd=False, fast=True,
             fifo_reader=None, stdin_bytes=None, timeout_ok=False):
        """Run one mpbench command and check the contract. Returns a Result (or None if skipped)."""
        if not self.want(cls):
            return None
        self.n += 1
        d = os.path.join(self.root, f'c{self.n:04d}')
        os.mkdir(d)
        ctx = {}
        if setup:
            ctx = setup(d) or {}
        rep = lambda a: (a.replace('{d}', d).replace('{s}', self.S) if isinstance(a, str) else a)
        argv = [self.mp] + [rep(a) for a in (args(d) if callable(args) else args)]
        run_cwd = rep(cwd) if cwd else d
        before = snap(d)
        outputs = {os.path.normpath(rep(o)) for o in outputs}

        stdout_target = subprocess.PIPE
        closers = []
        if stdout_mode == 'full':
            f = open('/dev/full', 'wb')
            closers.append(f)
            stdout_target = f
        elif stdout_mode == 'broken':
            r, w = os.pipe()
            os.close(r)
            closers.append(w)
            stdout_target = w

        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if stdout_mode == 'closed':
                os.close(1)
            if rmcwd:
                os.rmdir(run_cwd)

        reader = None
        if fifo_reader:
            box = {}

            def rd(p=rep(fifo_reader)):
                try:
                    with open(p, 'rb') as f:
                        box['data'] = f.read()
                except Exception as e:  # noqa
                    box['err'] = str(e)
            reader = threading.Thread(target=rd, daemon=True)
            reader.start()
            ctx['fifo_box'] = box

        t0 = time.monotonic()
        timed_out = False
        p = subprocess.Popen(argv, cwd=run_cwd, stdin=subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL,
                             stdout=stdout_target, stderr=subprocess.PIPE, preexec_fn=pre,
                             start_new_session=True)
        try:
            out, err = p.communicate(input=stdin_bytes, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
        elapsed = time.monotonic() - t0
        for c in closers:
            if isinstance(c, int):
                os.close(c)
            else:
                c.close()
        if reader:
            reader.join(timeout=5)
        out = out or b''
        rc = p.returncode
        signame = None
        if rc is not None and rc < 0:
            try:
                signame = signal.Signals(-rc).name
            except ValueError:
                signame = str(-rc)
        res = Result(rc, out, err or b'', elapsed, timed_out, signame)
        res.ctx = ctx
        res.dir = d

        hard, softp = [], []
        if timed_out and not timeout_ok:
            hard.append(f'hang: still running after {timeout} s (killed)')
        elif signame and not timed_out:
            hard.append(f'killed by signal {signame}')
        elif rc not in (0, 1, 2, 3, 4):
            hard.append(f'exit code {rc} outside {{0,1,2,3,4}}')

        # nothing the user owns is modified
        if not rmcwd and os.path.isdir(d):
            after = snap(d)
            for rel, v in before.items():
                a = after.get(rel)
                full = os.path.normpath(os.path.join(d, rel))
                if a is None:
                    hard.append(f'{rel} was removed')
                elif v[0] == 'link' and a[0] != 'link':
                    hard.append(f'symlink {rel} was replaced by a {a[0]}')
                elif a != v and full not in outputs:
                    hard.append(f'{rel} was modified ({v[0]})')
                elif a != v and rc == 2:
                    hard.append(f'existing output {rel} was changed on a refusal')
            for rel in after:
                if rel not in before:
                    if '.tmp.' in os.path.basename(rel):
                        hard.append(f'temporary file {rel} left behind')
                    elif rc == 2:
                        hard.append(f'{rel} was created on a refusal')
        if self.shared_snap is not None:
            now = snap(self.S)
            if now != self.shared_snap:
                diff = sorted(k for k in set(now) | set(self.shared_snap) if now.get(k) != self.shared_snap.get(k))
                hard.append(f'shared inputs changed: {diff[:5]}')
                self.shared_snap = now

        # the exit-2 contract
        if rc == 2 and not timed_out:
            lines = res.err.split(b'\n')
            if not res.err.endswith(b'\n') or len(lines) != 2 or not lines[0].strip():
                nl = res.err.count(b'\n')
                hard.append(f'exit 2 wants exactly one line on stderr, got {nl} newline(s), {len(res.err)} bytes')
            if len(res.err) > 2001:
                hard.append(f'stderr line is {len(res.err)} bytes (> 2000)')
            h, s = text_problems(res.err)
            hard += h
            softp += s
            if res.out:
                hard.append(f'exit 2 with {len(res.out)} bytes on stdout')
            for a in argv[1:]:
                a = os.fsencode(a) if isinstance(a, str) else a
                if len(a) > 200 and (a[:201] in res.err or a[-201:] in res.err):
                    hard.append(f'stderr echoes more than 200 bytes of a {len(a)}-byte argument')
                    break
            if fast and elapsed > FAST_S:
                hard.append(f'refusal took {elapsed:.1f} s (before any training?)')
        if rc == 3 and not timed_out:
            if not res.err.strip():
                hard.append('exit 3 with nothing on stderr')
            else:
                h, s = text_problems(res.err.rstrip(b'\n').split(b'\n')[-1], 'last stderr line')
                hard += h

        # the expectation
        exp_ok = True
        if not timed_out and not signame:
            if expect == 'bad':
                exp_ok = rc == 2
            elif expect == 'ok':
                exp_ok = rc == 0
            elif expect == 'accept':
                exp_ok = rc in (0, 1)
            elif expect == 'not_bad':
                exp_ok = rc != 2
            elif expect == 'io':
                exp_ok = rc == 3
            elif isinstance(expect, (set, tuple, list)):
                exp_ok = rc in expect
            exp_list = softp if soft else hard
            if not exp_ok:
                exp_list.append(f'expected {expect}, got exit {rc}')
            elif rc == 2 and names:
                low = res.errs
                for nm in names:
                    if nm not in low:
                        exp_list.append(f'message does not name {nm!r}')
            if check:
                for pr in check(res) or ():
                    (softp if pr.startswith('soft:') else hard).append(pr)

        rec = dict(cls=cls, name=name, cmd=self.show(argv, run_cwd), expected=str(expect), rc=rc,
                   elapsed=round(elapsed, 2), stderr=res.errs[:300])
        st = self.per_class.setdefault(cls, [0, 0])
        st[0] += 1
        if hard:
            self.defects.append(dict(rec, problems=hard))
        else:
            self.held += 1
            st[1] += 1
        if softp:
            self.observations.append(dict(rec, problems=softp))
        return res

    # ------------------------------------------------------------------ helpers for cases
    def wjson(self, path, obj):
        with open(path, 'w') as f:
            json.dump(obj, f)

    def wbytes(self, path, b):
        with open(path, 'wb') as f:
            f.write(b if isinstance(b, bytes) else b.encode())

    def spec_pair(self, cls, name, content, expect='any', names=(), soft=False, run_args=(),
                  extra=None, roundtrip=False, run=True):
        """validate and run one spec; check that they agree. content: dict, str or bytes."""
        fname = 'spec.json'

        def setup(d):
            p = os.path.join(d, fname)
            if isinstance(content, (dict, list)):
                self.wjson(p, content)
            else:
                self.wbytes(p, content)
            if extra:
                extra(d)
        v = self.case(cls, name + ' [validate]', ['validate', fname], expect=expect,
                      names=(fname,) + tuple(names) if expect == 'bad' else (), setup=setup, soft=soft)
        if v is None or not run:
            return v, None
        r_expect = {'ok': 'not_bad'}.get(expect, expect)
        args = ['run', fname, '--device', 'cpu', '--epochs', '1', '--quiet'] + list(run_args)
        outs = ()
        if roundtrip:
            args += ['--json', 'out.json']
            outs = ('{d}/out.json',)
        r = self.case(cls, name + ' [run]', args, expect=r_expect,
                      names=(fname,) + tuple(names) if r_expect == 'bad' else (), setup=setup,
                      soft=soft, outputs=outs)
        if r is None:
            return v, r
        if not v.timed_out and not r.timed_out and v.rc is not None and r.rc is not None:
            if (v.rc == 2) != (r.rc == 2) and v.rc >= 0 and r.rc >= 0:
                self.n += 1
                st = self.per_class.setdefault('agree', [0, 0])
                st[0] += 1
                self.defects.append(dict(cls='agree', name=name, cmd=f'validate -> {v.rc}; run -> {r.rc}',
                                         expected='validate and run agree on bad input', rc=r.rc,
                                         elapsed=r.elapsed,
                                         stderr=f'validate: {v.errs[:150]} | run: {r.errs[:150]}',
                                         problems=[f'validate exit {v.rc}, run exit {r.rc}']))
            else:
                self.n += 1
                self.held += 1
                st = self.per_class.setdefault('agree', [0, 0])
                st[0] += 1
                st[1] += 1
        if roundtrip and r.rc == 0 and os.path.exists(os.path.join(r.dir, 'out.json')):
            self.roundtrip(name, os.path.join(r.dir, 'out.json'))
        elif roundtrip:
            self.skipped.append(f'roundtrip of {name!r}: run exit {r.rc} ({r.errs.strip()[:120]})')
        return v, r

    def roundtrip(self, name, result_path, profile_path=None):
        """What run --json / profile --json write, compare and report accept."""
        src = result_path

        def setup(d):
            shutil.copy(src, os.path.join(d, 'a.json'))
            shutil.copy(src, os.path.join(d, 'b.json'))
            if profile_path:
                shutil.copy(profile_path, os.path.join(d, 'p.json'))
        self.case('roundtrip', name + ' [compare A A]', ['compare', 'a.json', 'a.json'], expect='accept', setup=setup)
        self.case('roundtrip', name + ' [compare A copy-of-A --json --md --junit]',
                  ['compare', 'a.json', 'b.json', '--json', 'c.json', '--md', 'c.md', '--junit', 'c.xml'],
                  expect='accept', setup=setup, outputs=('{d}/c.json', '{d}/c.md', '{d}/c.xml'))
        files = ['a.json'] + (['p.json'] if profile_path else [])
        self.case('roundtrip', name + ' [report]', ['report'] + files + ['--html', 'r.html', '--md', 'r.md'],
                  expect='accept', setup=setup, outputs=('{d}/r.html', '{d}/r.md'), check=self.html_check('r.html'))

    def html_check(self, fname):
        def chk(res):
            p = os.path.join(res.dir, fname)
            if res.rc in (0, 1) and os.path.exists(p):
                h = open(p, 'rb').read().lower()
                # markup, not escaped text: a real tag, an event attribute inside a tag, a javascript: URL
                if (b'<script' in h or re.search(rb'<[a-z][^<>]*\son[a-z]+\s*=', h)
                        or re.search(rb'<[a-z][^<>]*javascript:', h)):
                    return ['HTML report holds script (README: no JavaScript)']
                if re.search(rb'https?://(?!www\.w3\.org/)', h):
                    return ['soft: HTML report references the network']
            return []
        return chk

    # ------------------------------------------------------------------ fixtures
    def fixtures(self):
        S = self.S
        cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'configs')
        self.MLP = json.load(open(os.path.join(cfg, 'tiny_mlp.json')))
        self.TR = json.load(open(os.path.join(cfg, 'tiny_transformer.json')))
        self.RN = json.load(open(os.path.join(cfg, 'tiny_resnet.json')))
        self.GPT = json.load(open(os.path.join(cfg, 'tiny_gpt.json')))
        self.MLP['train']['epochs'] = 1
        self.MLP['precisions'] = ['fp32', 'amp_bf16']
        for sp in (self.TR, self.GPT):
            sp['data'].update(train_samples=512, eval_samples=128)
            sp['train']['epochs'] = 1
            sp['precisions'] = ['fp32', 'amp_bf16']
        self.RN['data'].update(train_samples=256, eval_samples=64)
        self.RN['train']['epochs'] = 1
        self.RN['precisions'] = ['fp32', 'amp_bf16']
        self.SLOW = copy.deepcopy(json.load(open(os.path.join(cfg, 'tiny_transformer.json'))))
        self.SLOW['name'] = 'slow'
        self.SLOW['data']['train_samples'] = 8192
        self.SLOW['train']['epochs'] = 2
        for n, sp in (('mlp', self.MLP), ('tr', self.TR), ('rn', self.RN), ('gpt', self.GPT), ('slow', self.SLOW)):
            self.wjson(os.path.join(S, n + '.json'), sp)

        def fx(name, args, out):
            r = self.case('fixture', name, args, expect='ok', cwd='{s}', outputs=())
            if r is None or r.rc != 0 or not os.path.exists(os.path.join(S, out)):
                self.skipped.append(f'fixture {out} could not be made')
        q = ['--device', 'cpu', '--quiet']
        fx('run mlp --json', ['run', 'mlp.json', '--json', 'r_mlp.json'] + q, 'r_mlp.json')
        fx('run mlp again --json', ['run', 'mlp.json', '--json', 'r_mlp2.json'] + q, 'r_mlp2.json')
        fx('run --repeat 3', ['run', 'mlp.json', '--repeat', '3', '--precisions', 'fp32', '--json', 'r_rep.json'] + q, 'r_rep.json')
        fx('run --seeds 2', ['run', 'mlp.json', '--seeds', '2', '--json', 'r_seeds.json'] + q, 'r_seeds.json')
        fx('run --batch-sizes', ['run', 'mlp.json', '--batch-sizes', '32,64', '--precisions', 'fp32', '--json', 'r_bs.json'] + q, 'r_bs.json')
        fx('run amp_fp8 mlp', ['run', 'mlp.json', '--precisions', 'amp_bf16,amp_fp8', '--json', 'r_fp8.json'] + q, 'r_fp8.json')
        fx('run amp_fp8 transformer', ['run', 'tr.json', '--precisions', 'amp_fp8', '--json', 'r_fp8t.json'] + q, 'r_fp8t.json')
        fx('run oom rows', ['run', 'mlp.json', '--memory-limit', '40KiB', '--json', 'r_oom.json'] + q, 'r_oom.json')
        fx('run transformer', ['run', 'tr.json', '--json', 'r_tr.json'] + q, 'r_tr.json')
        fx('run resnet', ['run', 'rn.json', '--json', 'r_rn.json'] + q, 'r_rn.json')
        bucket = setp(setp(setp(self.MLP, ('data', 'train_samples'), 4500), ('train', 'batch_size'), 1),
                      ('precisions',), ['fp32', 'amp_fp8'])
        bucket['name'] = 'bucket'
        self.wjson(os.path.join(S, 'bucket.json'), bucket)
        fx('run >4096 steps (buckets)', ['run', 'bucket.json', '--json', 'r_bucket.json'] + q, 'r_bucket.json')
        fx('profile mlp', ['profile', 'mlp.json', '--steps', '3', '--json', 'p_mlp.json'] + q, 'p_mlp.json')
        fx('profile transformer', ['profile', 'tr.json', '--steps', '2', '--json', 'p_tr.json'] + q, 'p_tr.json')
        fx('profile resnet', ['profile', 'rn.json', '--steps', '2', '--json', 'p_rn.json'] + q, 'p_rn.json')
        fx('profile amp_fp8', ['profile', 'mlp.json', '--steps', '2', '--precisions', 'amp_fp8', '--json', 'p_fp8.json'] + q, 'p_fp8.json')
        fx('explain', ['explain', 'mlp.json', '--steps', '2', '--json', 'e_mlp.json'] + q, 'e_mlp.json')
        fx('maxbatch', ['maxbatch', 'mlp.json', '--memory-limit', '1MiB', '--precisions', 'fp32', '--json', 'm_mlp.json'] + q, 'm_mlp.json')
        fx('inspect', ['inspect', 'mlp.json', '--json', 'i_mlp.json'], 'i_mlp.json')
        fx('compare --json', ['compare', 'r_mlp.json', 'r_mlp2.json', '--json', 'c_mlp.json'], 'c_mlp.json')
        fx('data', ['data', 'mlp.json', '--out', 'dx'], 'dx.json')
        os.makedirs(os.path.join(S, 'idx'))
        I = os.path.join(S, 'idx')
        self.wbytes(os.path.join(I, 'tri'), idx_images(256, 8, 8))
        self.wbytes(os.path.join(I, 'trl'), idx_labels(256))
        self.wbytes(os.path.join(I, 'evi'), idx_images(64, 8, 8))
        self.wbytes(os.path.join(I, 'evl'), idx_labels(64))
        self.shared_snap = snap(S)

    def have(self, *names):
        for n in names:
            if not os.path.exists(os.path.join(self.S, n)):
                return False
        return True

    # ------------------------------------------------------------------ classes
    def c_spec_syntax(self):
        cls = 'spec'
        good = json.dumps(self.MLP, indent=1)
        gb = good.encode()
        cases = [
            ('empty file', b'', 'bad'),
            ('whitespace only', b' \n\t\n', 'bad'),
            ('null document', b'null', 'bad'),
            ('array document', b'[]', 'bad'),
            ('string document', b'"mlp"', 'bad'),
            ('number document', b'1', 'bad'),
            ('BOM at file start', b'\xef\xbb\xbf' + gb, 'any'),
            ('BOM twice', b'\xef\xbb\xbf\xef\xbb\xbf' + gb, 'bad'),
            ('UTF-16LE with BOM', b'\xff\xfe' + good.encode('utf-16-le'), 'bad'),
            ('trailing " x"', gb + b' x', 'bad'),
            ('NUL then a second object', gb + b'\0' + gb, 'bad'),
            ('two objects', gb + gb, 'bad'),
            ('trailing blanks', gb + b'\n\n \t\r\n', 'ok'),
            ('trailing // comment', gb + b'//c', 'bad'),
            ('trailing ctrl-Z', gb + b'\x1a', 'bad'),
            ('trailing lone NUL', gb + b'\0', 'bad'),
            ('truncated in the middle', gb[:len(gb) // 2], 'bad'),
            ('unterminated string', b'{"name": "tiny', 'bad'),
            ('NaN token', good.replace('"lr": 0.003', '"lr": NaN').encode(), 'bad'),
            ('Infinity token', good.replace('"lr": 0.003', '"lr": Infinity').encode(), 'bad'),
            ('-Infinity token', good.replace('"weight_decay": 0.0', '"weight_decay": -Infinity').encode(), 'bad'),
            ('1e400 overflows a double', good.replace('"lr": 0.003', '"lr": 1e400').encode(), 'bad'),
            ('hex number', good.replace('"input_dim": 64', '"input_dim": 0x40').encode(), 'bad'),
            ('leading zero', good.replace('"input_dim": 64', '"input_dim": 064').encode(), 'bad'),
            ('leading plus', good.replace('"input_dim": 64', '"input_dim": +64').encode(), 'bad'),
            ('.5 without digit', good.replace('"lr": 0.003', '"lr": .5').encode(), 'bad'),
            ('1. without fraction', good.replace('"lr": 0.003', '"lr": 1.').encode(), 'bad'),
            ('single quotes', good.replace('"name"', "'name'").encode(), 'bad'),
            ('trailing comma object', good.rstrip()[:-1].encode() + b',}', 'bad'),
            ('trailing comma array', good.replace('"amp_bf16"', '"amp_bf16",').encode(), 'bad'),
            ('block comment', good.replace('{', '{/*c*/', 1).encode(), 'bad'),
            ('raw control char in string', good.replace('"tiny_mlp"', '"tiny\x01mlp"').encode(), 'bad'),
            ('raw newline in string', good.replace('"tiny_mlp"', '"tiny\nmlp"').encode(), 'bad'),
            ('invalid UTF-8 in name', gb.replace(b'"tiny_mlp"', b'"tiny\xffmlp"'), 'bad'),
            ('overlong UTF-8 slash', gb.replace(b'"tiny_mlp"', b'"tiny\xc0\xafmlp"'), 'bad'),
            ('CESU surrogate bytes', gb.replace(b'"tiny_mlp"', b'"tiny\xed\xa0\x80mlp"'), 'bad'),
            ('lone surrogate escape', good.replace('"tiny_mlp"', '"tiny\\ud800mlp"').encode(), 'bad'),
            ('reversed surrogate pair', good.replace('"tiny_mlp"', '"\\udc00\\ud800"').encode(), 'bad'),
            ('\\u0000 in name', good.replace('"tiny_mlp"', '"tiny\\u0000mlp"').encode(), 'bad'),
            ('bad escape \\x', good.replace('"tiny_mlp"', '"tiny\\x41"').encode(), 'bad'),
            ('name with U+202E', good.replace('"tiny_mlp"', '"tiny\\u202emlp"').encode(), 'bad'),
            ('name with U+2028', good.replace('"tiny_mlp"', '"tiny\u2028mlp"').encode(), 'bad'),
            ('name with ESC sequence', good.replace('"tiny_mlp"', '"\\u001b[31mred"').encode(), 'bad'),
            ('name 128 chars', good.replace('"tiny_mlp"', '"' + 'n' * 128 + '"').encode(), 'ok'),
            ('name 129 chars', good.replace('"tiny_mlp"', '"' + 'n' * 129 + '"').encode(), 'bad'),
            ('name 1 MB of zero-width spaces', good.replace('"tiny_mlp"', '"' + '\u200b' * 350000 + '"').encode(), 'bad'),
            ('model.type 1 MB', good.replace('"type": "mlp"', '"type": "' + 'm' * 1000000 + '"').encode(), 'bad'),
            ('activation with NUL', good.replace('"relu"', '"relu\\u0000"').encode(), 'bad'),
            ('empty name', good.replace('"tiny_mlp"', '""').encode(), 'bad'),
            ('name "."', good.replace('"tiny_mlp"', '"."').encode(), 'any'),
            ('name ".."', good.replace('"tiny_mlp"', '".."').encode(), 'any'),
            ('unknown key 100 KB with controls', good.replace('{', '{"' + 'k\\u0007\\u001b' * 30000 + '": 1,', 1).encode(), 'bad'),
            ('unknown key with bidi/zero-width/BOM/LS', good.replace('{', '{"a\\u202eb\\u200dc\\ufeffd\\u2028e\\u2066": 1,', 1).encode(), 'bad'),
            ('unknown key with invalid UTF-8', gb.replace(b'{', b'{"k\xfe\xff": 1,', 1), 'bad'),
            ('unknown key with unassigned U+0378', good.replace('{', '{"k\\u0378": 1,', 1).encode(), 'bad'),
            ('unknown key with private use and tag chars', good.replace('{', '{"k\\ue000\\udb40\\udc01": 1,', 1).encode(), 'bad'),
            ('duplicate top-level key name', good.replace('{', '{"name": "other",', 1).encode(), 'bad'),
            ('duplicate key at depth model.type', good.replace('"type": "mlp"', '"type": "transformer", "type": "mlp"').encode(), 'bad'),
            ('duplicate key at depth optimizer.lr', good.replace('"lr": 0.003', '"lr": 0.003, "lr": 0.003').encode(), 'bad'),
            ('duplicate key at depth data.seed', good.replace('"seed": 7', '"seed": 7, "seed": 8').encode(), 'bad'),
            ('duplicate key spelled with an escape', good.replace('"seed": 7', '"seed": 7, "s\\u0065ed": 8').encode(), 'bad'),
            ('duplicate whole object train', good.replace('"precisions"', '"train": {}, "precisions"').encode(), 'bad'),
        ]
        for depth in (33, 63, 64, 65, 100, 1000, 100000):
            cases.append((f'fp32_layers nested {depth} deep', deep_text(self.MLP, ('fp32_layers',), nest(depth, '"head"')).encode(), 'bad'))
        cases += [
            ('objects nested 100000 deep in unknown key', good.replace('{', '{"deep": ' + nest(100000, '1', '{"a":', '}') + ',', 1).encode(), 'bad'),
            ('document is 100000 open brackets', b'[' * 100000, 'bad'),
            ('document is 100000 open braces', b'{"a":' * 100000, 'bad'),
            ('hidden nested 40 deep', deep_text(self.MLP, ('model', 'hidden'), nest(40, '32')).encode(), 'bad'),
        ]
        if not self.quick:
            cases += [
                ('precisions 100000 entries', json.dumps(setp(self.MLP, ('precisions',), ['fp32'] * 100000)).encode(), 'bad'),
                ('fp32_layers 200000 unknown names', json.dumps(setp(self.MLP, ('fp32_layers',), [f'l{i}' for i in range(200000)])).encode(), 'bad'),
                ('hidden 5000 layers of width 1', json.dumps(setp(self.MLP, ('model', 'hidden'), [1] * 5000)).encode(), 'any'),
                ('hidden 1e6 entries', json.dumps(setp(self.MLP, ('model', 'hidden'), [1] * 1000000)).encode(), 'any'),
            ]
        for name, content, exp in cases:
            # a spec refused for its syntax: validate only for the costly ones
            soft = name.startswith('duplicate') or name.startswith('BOM')
            self.spec_pair(cls, name, content, expect=exp, soft=soft,
                           run=not name.startswith('hidden 1e6'))

    def c_spec_values(self):
        cls = 'spec'
        M, T, R = self.MLP, self.TR, self.RN
        wrong_types = ['64', True, None, [], {}]
        fields = [
            (M, ('name',), 'str'), (M, ('model',), 'obj'), (M, ('model', 'type'), 'str'),
            (M, ('model', 'input_dim'), 'pint'), (M, ('model', 'hidden'), 'arr'), (M, ('model', 'hidden', 0), 'pint'),
            (M, ('model', 'num_classes'), 'pint'), (M, ('model', 'activation'), 'str'), (M, ('data',), 'obj'),
            (M, ('data', 'type'), 'str'), (M, ('data', 'train_samples'), 'pint'), (M, ('data', 'eval_samples'), 'pint'),
            (M, ('data', 'seed'), 'uint'), (M, ('train',), 'obj'), (M, ('train', 'batch_size'), 'pint'),
            (M, ('train', 'epochs'), 'pint'), (M, ('train', 'warmup_steps'), 'uint'),
            (M, ('train', 'optimizer'), 'obj'), (M, ('train', 'optimizer', 'type'), 'str'),
            (M, ('train', 'optimizer', 'lr'), 'pfloat'), (M, ('train', 'optimizer', 'weight_decay'), 'ufloat'),
            (M, ('precisions',), 'arr'), (M, ('precisions', 0), 'str'), (M, ('loss_scale',), 'obj'),
            (M, ('loss_scale', 'init'), 'pfloat'), (M, ('loss_scale', 'growth_factor'), 'pfloat'),
            (M, ('loss_scale', 'backoff_factor'), 'pfloat'), (M, ('loss_scale', 'growth_interval'), 'pint'),
            (M, ('fp32_layers',), 'arr'), (M, ('fp32_layers', 0), 'str'),
            (T, ('model', 'd_model'), 'pint'), (T, ('model', 'heads'), 'pint'), (T, ('model', 'ffn_dim'), 'pint'),
            (T, ('model', 'seq_len'), 'pint'), (T, ('model', 'layers'), 'pint'), (T, ('model', 'vocab_size'), 'pint'),
            (T, ('model', 'causal'), 'bool'),
            (R, ('model', 'image_size'), 'pint'), (R, ('model', 'in_channels'), 'pint'), (R, ('model', 'width'), 'pint'),
            (R, ('model', 'out_channels'), 'pint'), (R, ('model', 'blocks'), 'pint'), (R, ('model', 'stride'), 'pint'),
        ]
        fp8 = setp(M, ('fp8',), {'amax_history_len': 16, 'amax_compute': 'max', 'margin': 0})
        fields += [(fp8, ('fp8',), 'obj'), (fp8, ('fp8', 'amax_history_len'), 'pint'),
                   (fp8, ('fp8', 'amax_compute'), 'str'), (fp8, ('fp8', 'margin'), 'uint')]
        for base, path, kind in fields:
            for wt in wrong_types:
                if kind == 'str' and isinstance(wt, str):
                    continue
                if kind == 'bool' and isinstance(wt, bool):
                    continue
                if kind == 'arr' and wt == []:
                    continue
                if kind == 'obj' and wt == {}:
                    continue
                sp = setp(base, path, wt)
                label = f'{jpath(path)} = {json.dumps(wt)}'
                self.spec_pair(cls, label, sp, expect='bad', names=(jpath(path),),
                               run=not self.quick)
        # numeric edges
        int_edges = [(0, 'bad'), (-1, 'bad'), (-0.0, 'bad'), (64.5, 'bad'), (1e308, 'bad'), (5e-324, 'bad'),
                     (1e-320, 'bad'), (18446744073709551616, 'bad'), (9223372036854775808, 'bad'),
                     (-9223372036854775809, 'bad'), (4294967297, 'bad'), (4294967360, 'bad')]
        for base, path in [(M, ('train', 'batch_size')), (M, ('model', 'hidden', 0)), (T, ('model', 'heads')),
                           (M, ('model', 'input_dim')), (M, ('loss_scale', 'growth_interval')),
                           (R, ('model', 'stride'))]:
            for v, exp in int_edges:
                sp = setp(base, path, v)
                self.spec_pair(cls, f'{jpath(path)} = {v!r}', sp, expect=exp, names=(jpath(path),),
                               run=not self.quick and v in (4294967297, 4294967360, -0.0, 1e308))
        # wraparound to a valid value through 32/64-bit integers, and float edges, in the raw text
        g = json.dumps(M)
        B, A, SB = 'bad', 'any', 'soft'
        for label, old, new, exp in [
            ('input_dim 2^64+64 (wraps to 64)', '"input_dim": 64', '"input_dim": 18446744073709551680', B),
            ('hidden 2^32+32 (wraps to 32)', '[32]', '[4294967328]', B),
            ('batch_size 2^32+64 (wraps to 64)', '"batch_size": 64', '"batch_size": 4294967360', B),
            ('seed 2^64 exactly', '"seed": 7', '"seed": 18446744073709551616', B),
            ('seed 2^64-1', '"seed": 7', '"seed": 18446744073709551615', A),
            ('seed 1e19 as float', '"seed": 7', '"seed": 1e19', A),
            ('seed 7.0', '"seed": 7', '"seed": 7.0', A),
            ('seed 7e0', '"seed": 7', '"seed": 7e0', A),
            ('seed -0', '"seed": 7', '"seed": -0', A),
            ('epochs 1E0', '"epochs": 1', '"epochs": 1E0', A),
            ('input_dim 6.4e1', '"input_dim": 64', '"input_dim": 6.4e1', A),
            ('input_dim 64 with 400-digit exponent 0', '"input_dim": 64', '"input_dim": 64e' + '0' * 400, A),
            ('lr with 5000 digits', '"lr": 0.003', '"lr": 0.00' + '3' * 5000, A),
            ('lr 1e-46 (0 as float)', '"lr": 0.003', '"lr": 1e-46', B),
            ('lr 1e-320 denormal', '"lr": 0.003', '"lr": 1e-320', B),
            ('lr -0', '"lr": 0.003', '"lr": -0', B),
            ('lr 3.4028237e38 (inf as float)', '"lr": 0.003', '"lr": 3.4028237e38', B),
            ('lr 3.4028235e38 (FLT_MAX)', '"lr": 0.003', '"lr": 3.4028235e38', A),
            ('weight_decay -0.0', '"weight_decay": 0.0', '"weight_decay": -0.0', A),
            ('weight_decay 1e-320', '"weight_decay": 0.0', '"weight_decay": 1e-320', A),
            ('weight_decay -1e-320', '"weight_decay": 0.0', '"weight_decay": -1e-320', A),
            ('weight_decay 1e308 (inf as float)', '"weight_decay": 0.0', '"weight_decay": 1e308', B),
            ('weight_decay -1', '"weight_decay": 0.0', '"weight_decay": -1', B),
            ('loss_scale.init 1e39 (inf as float)', '"init": 65536', '"init": 1e39', B),
            ('loss_scale.init 1e-46 (0 as float)', '"init": 65536', '"init": 1e-46', B),
            ('growth_factor 1e39 (a double: finite)', '"growth_factor": 2.0', '"growth_factor": 1e39', A),
            ('growth_factor 1e309 (overflows a double)', '"growth_factor": 2.0', '"growth_factor": 1e309', B),
            ('growth_factor 1.0000000000000001 (1 as a double)', '"growth_factor": 2.0', '"growth_factor": 1.0000000000000001', B),
            ('growth_factor 0.5 (shrinks)', '"growth_factor": 2.0', '"growth_factor": 0.5', A),
            ('backoff_factor 0', '"backoff_factor": 0.5', '"backoff_factor": 0', B),
            ('backoff_factor 1.5 (grows)', '"backoff_factor": 0.5', '"backoff_factor": 1.5', A),
            ('backoff_factor 1e-46 (a double: > 0)', '"backoff_factor": 0.5', '"backoff_factor": 1e-46', A),
            ('backoff_factor 1e-400 (0 as a double)', '"backoff_factor": 0.5', '"backoff_factor": 1e-400', B),
            ('backoff_factor 1.0000000000000001 (1 as a double)', '"backoff_factor": 0.5', '"backoff_factor": 1.0000000000000001', A),
            ('growth_interval 2^31', '"growth_interval": 2000', '"growth_interval": 2147483648', A),
        ]:
            assert old in g, old
            self.spec_pair(cls, label, g.replace(old, new, 1), expect='bad' if exp == SB else exp, soft=exp == SB)
        # optimizer / family specific
        def adam(**kw):
            return setp(M, ('train', 'optimizer'), dict({'type': 'adam', 'lr': 0.003, 'weight_decay': 0.0}, **kw))
        more = [
            ('beta2 0.99999999 (1 as float)', adam(beta2=0.99999999), 'bad', False),
            ('beta2 0.9999999 (<1 as float)', adam(beta2=0.9999999), 'ok', True),
            ('beta1 1.0', adam(beta1=1.0), 'bad', True),
            ('beta1 -0.0', adam(beta1=-0.0), 'any', False),
            ('eps 0', adam(eps=0), 'any', False),
            ('eps 1e-46 (0 as float)', adam(eps=1e-46), 'any', False),
            ('eps -1e-8', adam(eps=-1e-8), 'bad', True),
            ('momentum on adam', adam(momentum=0.9), 'bad', False),
            ('sgd momentum 1.0', setp(M, ('train', 'optimizer'), {'type': 'sgd', 'lr': 0.05, 'momentum': 1.0, 'weight_decay': 0.0}), 'any', False),
            ('sgd momentum -0.5', setp(M, ('train', 'optimizer'), {'type': 'sgd', 'lr': 0.05, 'momentum': -0.5, 'weight_decay': 0.0}), 'bad', True),
            ('sgd momentum 1.00000001 (1 as float)', setp(M, ('train', 'optimizer'), {'type': 'sgd', 'lr': 0.05, 'momentum': 1.00000001, 'weight_decay': 0.0}), 'any', False),
            ('optimizer type ADAM', adam(type='ADAM'), 'bad', False),
            ('optimizer type "adam " with blank', adam(type='adam '), 'bad', False),
            ('mlp with d_model key', setp(M, ('model', 'd_model'), 32), 'bad', False),
            ('transformer with hidden key', setp(T, ('model', 'hidden'), [32]), 'bad', False),
            ('transformer heads 3 do not divide 32', setp(T, ('model', 'heads'), 3), 'bad', False),
            ('transformer heads 64 > d_model', setp(T, ('model', 'heads'), 64), 'bad', False),
            ('transformer causal "true"', setp(T, ('model', 'causal'), 'true'), 'bad', False),
            ('transformer causal 1', setp(T, ('model', 'causal'), 1), 'bad', False),
            ('transformer tie_embeddings null', setp(T, ('model', 'tie_embeddings'), None), 'bad', False),
            ('transformer vocab 1', setp(T, ('model', 'vocab_size'), 1), 'bad', False),
            ('transformer seq_len 131073', setp(T, ('model', 'seq_len'), 131073), 'bad', False),
            ('resnet stride 3', setp(R, ('model', 'stride'), 3), 'any', False),
            ('resnet image_size 1', setp(R, ('model', 'image_size'), 1), 'any', False),
            ('resnet stem bogus', setp(R, ('model', 'stem'), 'bogus'), 'bad', False),
            ('resnet stages and blocks both', setp(R, ('model', 'stages'), [{'blocks': 1, 'width': 8, 'out_channels': 16, 'stride': 1}]), 'any', False),
            ('resnet stages []', setp(setp(setp(setp(setp(R, ('model', 'stages'), []), ('model', 'blocks'), DEL), ('model', 'width'), DEL), ('model', 'out_channels'), DEL), ('model', 'stride'), DEL), 'any', False),
            ('resnet stage stride 0', setp(setp(setp(setp(setp(R, ('model', 'stages'), [{'blocks': 1, 'width': 8, 'out_channels': 16, 'stride': 0}]), ('model', 'blocks'), DEL), ('model', 'width'), DEL), ('model', 'out_channels'), DEL), ('model', 'stride'), DEL), 'bad', True),
            ('resnet stage unknown key', setp(setp(setp(setp(setp(R, ('model', 'stages'), [{'blocks': 1, 'width': 8, 'out_channels': 16, 'stride': 1, 'zz': 1}]), ('model', 'blocks'), DEL), ('model', 'width'), DEL), ('model', 'out_channels'), DEL), ('model', 'stride'), DEL), 'bad', False),
            ('data type "IDX"', setp(M, ('data', 'type'), 'IDX'), 'bad', False),
            ('synthetic with train_images key', setp(M, ('data', 'train_images'), 'x'), 'bad', True),
            ('batch_size > train_samples', setp(M, ('train', 'batch_size'), 4096), 'bad', False),
            ('batch_size == train_samples', setp(M, ('train', 'batch_size'), 2048), 'ok', True),
            ('precisions []', setp(M, ('precisions',), []), 'any', False),
            ('precisions ["amp_fp8"] on mlp', setp(M, ('precisions',), ['amp_fp8']), 'ok', True),
            ('precisions duplicate', setp(M, ('precisions',), ['fp32', 'fp32']), 'bad', False),
            ('precisions "FP32"', setp(M, ('precisions',), ['FP32']), 'bad', False),
            ('fp32_layers unknown name', setp(M, ('fp32_layers',), ['fc9']), 'bad', False),
            ('fp32_layers "fc1"', setp(M, ('fp32_layers',), ['fc1']), 'ok', True),
            ('fp32_layers "" ', setp(M, ('fp32_layers',), ['']), 'bad', False),
            ('fp32_layers on transformer "layer1.qkv"', setp(T, ('fp32_layers',), ['layer1.qkv']), 'any', False),
            ('fp32_layers on transformer "layer9"', setp(T, ('fp32_layers',), ['layer9']), 'bad', False),
            ('fp8 amax_history_len 0', setp(fp8, ('fp8', 'amax_history_len'), 0), 'bad', True),
            ('fp8 amax_history_len 1', setp(fp8, ('fp8', 'amax_history_len'), 1), 'ok', True),
            ('fp8 amax_history_len 2^31', setp(fp8, ('fp8', 'amax_history_len'), 2 ** 31), 'any', False),
            ('fp8 amax_compute bogus', setp(fp8, ('fp8', 'amax_compute'), 'mean'), 'bad', False),
            ('fp8 margin -1', setp(fp8, ('fp8', 'margin'), -1), 'any', False),
            ('fp8 margin 1000', setp(fp8, ('fp8', 'margin'), 1000), 'any', False),
            ('fp8 margin 0.5', setp(fp8, ('fp8', 'margin'), 0.5), 'any', False),
            ('fp8 unknown key', setp(fp8, ('fp8', 'recipe'), 'hybrid'), 'bad', False),
            ('loss_scale unknown key', setp(M, ('loss_scale', 'enabled'), True), 'bad', False),
            ('missing model', setp(M, ('model',), DEL), 'bad', False),
            ('missing name', setp(M, ('name',), DEL), 'any', False),
            ('missing data', setp(M, ('data',), DEL), 'any', False),
            ('warmup_steps 10^9', setp(M, ('train', 'warmup_steps'), 10 ** 9), 'any', False),
            ('num_classes 1', setp(M, ('model', 'num_classes'), 1), 'any', False),
        ]
        for label, sp, exp, sft in more:
            self.spec_pair(cls, label, sp, expect=exp, soft=sft)
        # warmup_steps is valid up to 2^30: a run must not need memory in proportion to it
        self.case(cls, 'warmup_steps 2^30 (valid): no failure for memory', ['run', 'spec.json', '--device', 'cpu', '--epochs', '1', '--quiet', '--precisions', 'fp32'],
                  expect='any', timeout=8, timeout_ok=True, setup=lambda d: self.wjson(os.path.join(d, 'spec.json'), setp(M, ('train', 'warmup_steps'), 2 ** 30)),
                  check=lambda r: ['soft: a valid spec fails with exit 3 within seconds (memory in proportion to warmup_steps?)'] if r.rc == 3 else [])
        if not self.quick:
            # validate accepts it; run may not refuse it as bad input (RLIMIT_AS applies)
            self.spec_pair(cls, 'input_dim 10^6 (accepted by validate)', setp(M, ('model', 'input_dim'), 10 ** 6),
                           expect='any', run_args=['--memory-limit', '64MiB'])

    def c_roundtrip(self):
        """Specs at the edges of the valid: validate, run --json, then compare A A and report."""
        M, T, R, G = self.MLP, self.TR, self.RN, self.GPT
        edge = [
            ('mlp without hidden layers', setp(M, ('model', 'hidden'), [])),
            ('mlp input_dim 1 num_classes 2 hidden [1]', setp(setp(setp(setp(M, ('model', 'input_dim'), 1), ('model', 'num_classes'), 2), ('model', 'hidden'), [1]), ('fp32_layers',), [])),
            ('mlp batch == train_samples, eval 1', setp(setp(setp(M, ('data', 'train_samples'), 64), ('data', 'eval_samples'), 1), ('train', 'batch_size'), 64)),
            ('mlp batch 1 train 64', setp(setp(M, ('data', 'train_samples'), 64), ('train', 'batch_size'), 1)),
            ('mlp gelu sgd momentum 0', setp(setp(M, ('model', 'activation'), 'gelu'), ('train', 'optimizer'), {'type': 'sgd', 'lr': 0.05, 'momentum': 0.0, 'weight_decay': 0.0})),
            ('mlp warmup 0', setp(M, ('train', 'warmup_steps'), 0)),
            ('mlp lr 1e3 diverges (all modes)', setp(setp(M, ('train', 'optimizer', 'lr'), 1000.0), ('precisions',), ['fp32', 'amp_fp16', 'amp_bf16'])),
            ('amp_fp16 scale driven to 0 (init 1e38, backoff 1e-300)', setp(setp(setp(M, ('loss_scale', 'backoff_factor'), 1e-300), ('loss_scale', 'init'), 1e38), ('precisions',), ['amp_fp16'])),
            ('amp_fp16 init 1e38 backoff 0.5 (skips, then trains)', setp(setp(M, ('loss_scale', 'init'), 1e38), ('precisions',), ['amp_fp16'])),
            ('amp_fp16 growth every step, factor 1e30', setp(setp(setp(M, ('loss_scale', 'growth_interval'), 1), ('loss_scale', 'growth_factor'), 1e30), ('precisions',), ['amp_fp16'])),
            ('amp_fp8 history 1 most_recent margin 5', setp(setp(M, ('fp8',), {'amax_history_len': 1, 'amax_compute': 'most_recent', 'margin': 5}), ('precisions',), ['amp_fp8'])),
            ('amp_fp8 margin 32 (the largest)', setp(setp(M, ('fp8',), {'amax_history_len': 4, 'amax_compute': 'max', 'margin': 32}), ('precisions',), ['amp_fp8'])),
            ('amp_fp8 history 65536 (the largest)', setp(setp(M, ('fp8',), {'amax_history_len': 65536, 'amax_compute': 'max', 'margin': 0}), ('precisions',), ['amp_fp8'])),
            ('amp_fp8 lr 1e30 (amax not finite)', setp(setp(M, ('train', 'optimizer', 'lr'), 1e30), ('precisions',), ['amp_fp8'])),
            ('amp_fp8 no fp8 layer (head pinned, hidden [])', setp(setp(M, ('model', 'hidden'), []), ('precisions',), ['amp_fp8'])),
            ('amp_fp8 lr 1e3 (diverges)', setp(setp(M, ('train', 'optimizer', 'lr'), 1000.0), ('precisions',), ['amp_fp8'])),
            ('transformer head_dim 1 seq 1 vocab 2', setp(setp(setp(setp(setp(setp(T, ('model', 'd_model'), 16), ('model', 'heads'), 16), ('model', 'seq_len'), 1), ('model', 'vocab_size'), 2), ('model', 'layers'), 1), ('model', 'causal'), False)),
            ('gpt tied amp_fp16 amp_fp8', setp(G, ('precisions',), ['amp_fp16', 'amp_fp8'])),
            ('resnet amp_fp8 (convs in bf16)', setp(R, ('precisions',), ['amp_fp8'])),
            ('resnet one block stride 1 image 4', setp(setp(setp(R, ('model', 'blocks'), 1), ('model', 'stride'), 1), ('model', 'image_size'), 4)),
            ('all five modes', setp(M, ('precisions',), ['fp32', 'tf32', 'amp_fp16', 'amp_bf16', 'amp_fp8'])),
            ('name with dots and dashes', setp(M, ('name',), '-.-_9')),
            ('html-ish name (only allowed chars)', setp(M, ('name',), 'a.b-c_d')),
        ]
        for label, sp in edge:
            self.spec_pair('roundtrip', label, sp, expect='any', roundtrip=True)
        # option-made edges
        q = ['--device', 'cpu', '--quiet']
        for label, extra_args in [
            ('--memory-limit 1KiB (every mode oom)', ['--memory-limit', '1KiB']),
            ('--seeds 2 --repeat 3', ['--seeds', '2', '--repeat', '3', '--precisions', 'fp32']),
            ('--batch-sizes 1,2048', ['--batch-sizes', '1,2048', '--precisions', 'fp32']),
            ('--seed 0', ['--seed', '0']),
            ('--seed 4611686018427387904 (max)', ['--seed', '4611686018427387904']),
            ('--memory-limit 1.5GiB', ['--memory-limit', '1.5GiB']),
        ]:
            r = self.case('roundtrip', 'run ' + label, ['run', '{s}/mlp.json', '--json', 'o.json'] + q + extra_args,
                          expect='ok', outputs=('{d}/o.json',))
            if r is not None and r.rc == 0:
                self.roundtrip(label, os.path.join(r.dir, 'o.json'))
        # fixtures made by run/profile: compare and report accept them
        pairs = [('r_mlp.json', 'p_mlp.json'), ('r_rep.json', None), ('r_seeds.json', None), ('r_bs.json', None),
                 ('r_fp8.json', 'p_fp8.json'), ('r_fp8t.json', None), ('r_oom.json', None), ('r_tr.json', 'p_tr.json'),
                 ('r_rn.json', 'p_rn.json'), ('r_bucket.json', None)]
        for r, p in pairs:
            if self.have(r) and (p is None or self.have(p)):
                self.roundtrip('fixture ' + r, os.path.join(self.S, r), os.path.join(self.S, p) if p else None)
        if self.have('r_mlp.json', 'r_mlp2.json', 'r_rep.json'):
            self.case('roundtrip', 'report --history of two run files', ['report', '--history', '{s}/r_mlp.json', '{s}/r_mlp2.json', '--html', 'h.html'],
                      expect='accept', outputs=('{d}/h.html',))
            self.case('roundtrip', 'report --history same file twice', ['report', '--history', '{s}/r_mlp.json', '{s}/r_mlp.json', '--html', 'h.html'],
                      expect='any', outputs=('{d}/h.html',))
            self.case('roundtrip', 'compare --baseline x3 (same file) vs repeat', ['compare', '--baseline', '{s}/r_rep.json', '--baseline', '{s}/r_rep.json', '--baseline', '{s}/r_rep.json', '{s}/r_rep.json'],
                      expect='any')
            self.case('roundtrip', 'compare two different runs', ['compare', '{s}/r_mlp.json', '{s}/r_mlp2.json'], expect='accept')

            def swapped_copies(d):
                shutil.copy(os.path.join(self.S, 'r_mlp2.json'), os.path.join(d, 'c1.json'))
                shutil.copy(os.path.join(self.S, 'r_mlp.json'), os.path.join(d, 'c2.json'))
            self.case('roundtrip', 'compare --paired, each run file on both sides in turn',
                      ['compare', '--paired', '--baseline', '{s}/r_mlp.json', '--baseline', '{s}/r_mlp2.json',
                       '--current', 'c1.json', '--current', 'c2.json', '--json', 'p.json'], expect='accept',
                      setup=swapped_copies, outputs=('{d}/p.json',))
            self.case('roundtrip', 'compare --paired with one file short', ['compare', '--paired', '--baseline', '{s}/r_mlp.json',
                      '--baseline', '{s}/r_mlp2.json', '--current', '{s}/r_rep.json'], expect='bad')
            self.case('roundtrip', 'report several results and profiles', ['report', '{s}/r_mlp.json', '{s}/r_tr.json', '{s}/r_rn.json', '{s}/p_mlp.json', '{s}/p_tr.json', '{s}/p_rn.json', '--html', 'x.html'],
                      expect='accept', outputs=('{d}/x.html',))
            self.case('roundtrip', 'report profile before result', ['report', '{s}/p_mlp.json', '{s}/r_mlp.json', '--html', 'x.html'],
                      expect='accept', outputs=('{d}/x.html',))
            self.case('roundtrip', 'report profile only', ['report', '{s}/p_mlp.json', '--html', 'x.html'], expect='any', outputs=('{d}/x.html',))
            self.case('roundtrip', 'report same file twice', ['report', '{s}/r_mlp.json', '{s}/r_mlp.json', '--html', 'x.html'], expect='any', outputs=('{d}/x.html',))
            self.case('roundtrip', 'data --out then validate', ['validate', '{s}/mlp.json'], expect='ok')
        # a spec-changed file pair: exit 4 naming the path
        if self.have('r_mlp.json'):
            base = json.load(open(os.path.join(self.S, 'r_mlp.json')))
            def setup(d):
                self.wjson(os.path.join(d, 'b.json'), setp(base, ('specs', 0, 'train', 'optimizer', 'lr'), 0.004))
            self.case('results', 'spec changed under the same name -> 4 naming the path',
                      ['compare', '{s}/r_mlp.json', 'b.json'], expect=(4,), setup=setup,
                      check=lambda r: [] if b'lr' in r.out + r.err else ['the changed JSON path (train.optimizer.lr) is not named'])
            def setup2(d):
                self.wjson(os.path.join(d, 'b.json'), setp(base, ('env', 'cpu', 'name'), 'Other CPU'))
            self.case('results', 'environment changed -> compared, named', ['compare', '{s}/r_mlp.json', 'b.json'],
                      expect='accept', setup=setup2)
            self.case('results', 'environment changed --strict -> 4', ['compare', '{s}/r_mlp.json', 'b.json', '--strict'],
                      expect=(4,), setup=setup2)
            def setup3(d):
                self.wjson(os.path.join(d, 'b.json'), setp(base, ('runs',), [setp(x, ('device',), 'cuda') for x in base['runs']]))
            self.case('results', 'nothing matched -> 4', ['compare', '{s}/r_mlp.json', 'b.json'], expect=(4,), setup=setup3)

    def c_results(self):
        cls = 'results'
        if not self.have('r_mlp.json', 'p_mlp.json', 'r_fp8.json', 'r_bucket.json'):
            self.skipped.append('results class: fixtures missing')
            return
        R = json.load(open(os.path.join(self.S, 'r_mlp.json')))
        P = json.load(open(os.path.join(self.S, 'p_mlp.json')))
        F = json.load(open(os.path.join(self.S, 'r_fp8.json')))
        BK = json.load(open(os.path.join(self.S, 'r_bucket.json')))

        def both(label, content, expect, names=(), soft=False, report=True, history=False):
            """compare X X, compare good X, and report X --html."""
            def setup(d):
                p = os.path.join(d, 'x.json')
                if isinstance(content, (dict, list)):
                    self.wjson(p, content)
                else:
                    self.wbytes(p, content)
            nm = ('x.json',) + tuple(names) if expect == 'bad' else ()
            self.case(cls, label + ' [compare X X]', ['compare', 'x.json', 'x.json'], expect=expect, names=nm, setup=setup, soft=soft)
            self.case(cls, label + ' [compare good X]', ['compare', '{s}/r_mlp.json', 'x.json'],
                      expect='bad' if expect == 'bad' else 'any', names=nm, setup=setup, soft=soft)
            if report:
                self.case(cls, label + ' [report]', ['report', 'x.json', '--html', 'o.html'], expect=expect, names=nm,
                          setup=setup, soft=soft, outputs=('{d}/o.html',), check=self.html_check('o.html'))
            if history:
                self.case(cls, label + ' [report --history]', ['report', '--history', '{s}/r_mlp.json', 'x.json', '--html', 'o.html'],
                          expect=expect, names=nm, setup=setup, soft=soft, outputs=('{d}/o.html',))

        r0 = ('runs', 0)
        explicit = [  # README: negative time, accuracy outside [0,1], null where a measured number belongs
            (r0 + ('final_accuracy',), 1.5), (r0 + ('final_accuracy',), -0.01), (r0 + ('final_accuracy',), 1.0000000001),
            (r0 + ('final_accuracy',), None), (r0 + ('final_accuracy',), '0.9'),
            (r0 + ('epochs', 0, 'eval_accuracy'), 2), (r0 + ('epochs', 0, 'eval_accuracy'), None),
            (r0 + ('epochs', 0, 'time_ms'), -1), (r0 + ('epochs', 0, 'time_ms'), None), (r0 + ('epochs', 0, 'time_ms'), -1e-300),
            (r0 + ('epochs', 0, 'eval_time_ms'), -5),
            (r0 + ('epoch_time_ms', 'median'), -1), (r0 + ('epoch_time_ms', 'min'), -1), (r0 + ('epoch_time_ms', 'max'), None),
            (r0 + ('epoch_time_ms',), None), (r0 + ('epoch_time_ms',), 5),
            (r0 + ('samples_per_second',), None),
            (r0 + ('peak_memory_bytes', 'training'), None), (r0 + ('peak_memory_bytes',), None),
            (r0 + ('epochs',), None), (r0 + ('epochs',), {}), (r0 + ('epochs', 0), None), (r0 + ('epochs', 0), []),
            (r0 + ('steps',), 'x'), (r0 + ('steps', 'loss'), 'x'), (r0 + ('steps', 'loss'), {}),
            (r0 + ('status',), 7), (r0 + ('model',), 7), (r0 + ('precision',), None),
            (('runs',), {}), (('runs',), None), (('runs',), 'x'), (('runs', 0), None), (('runs', 0), 7),
        ]
        for path, v in explicit:
            both(f'{jpath(path)} = {json.dumps(v)}', setp(R, path, v), 'bad', names=(jpath(path),))
        # README does not spell these out: read as not-a-result, soft
        soft_bad = [
            (r0 + ('samples_per_second',), -5), (r0 + ('peak_memory_bytes', 'training'), -1),
            (r0 + ('peak_memory_bytes', 'training'), 1.5), (r0 + ('peak_memory_bytes', 'by_category', 'activations'), -5),
            (r0 + ('skipped_steps',), -1), (r0 + ('skipped_steps',), 1.5), (r0 + ('final_loss_scale',), -1),
            (r0 + ('batch_size',), 0), (r0 + ('batch_size',), -1), (r0 + ('batch_size',), 1.5),
            (r0 + ('status',), 'bogus'), (r0 + ('precision',), 'fp64'), (r0 + ('precision',), ''), (r0 + ('model',), ''),
            (r0 + ('epoch_time_ms', 'cv'), -1), (r0 + ('epoch_time_ms', 'stddev'), -1), (r0 + ('tflops',), -1),
            (r0 + ('flops_per_step',), -1), (r0 + ('warmup_steps',), -1), (r0 + ('train_samples',), -1),
            (r0 + ('epochs', 0, 'steps'), -1), (r0 + ('cuda_graphs',), 'yes'), (r0 + ('device',), 7),
            (('schema_version',), 2), (('schema_version',), '1'), (('schema_version',), None),
            (('specs',), 'x'), (('specs', 0), 'x'), (('env',), 'x'), (('provenance',), 'x'),
            (('provenance', 'time_utc'), 12), (('tool',), 7),
        ]
        for path, v in soft_bad:
            both(f'{jpath(path)} = {json.dumps(v)}', setp(R, path, v), 'bad', names=(jpath(path),), soft=True)
        # no crash / accept
        anyv = [
            # a time is > 0: -0.0 as 0
            (r0 + ('epochs', 0, 'time_ms'), -0.0, 'bad'), (r0 + ('final_loss_scale',), 0, 'accept'),
            (r0 + ('final_accuracy',), 0, 'accept'), (r0 + ('final_accuracy',), 1, 'accept'),
            (r0 + ('peak_memory_bytes', 'training'), 1e308, 'any'), (r0 + ('peak_memory_bytes', 'training'), 18446744073709551616, 'any'),
            (r0 + ('peak_memory_bytes', 'training'), 9.3e18, 'any'), (r0 + ('skipped_steps',), 1e20, 'any'),
            (r0 + ('batch_size',), 1e30, 'any'), (r0 + ('epoch_time_ms', 'median'), 1e308, 'any'),
            (r0 + ('epoch_time_ms', 'median'), 5e-324, 'any'), (r0 + ('samples_per_second',), 0, 'any'),
            (r0 + ('epochs',), [], 'any'), (r0 + ('steps', 'loss'), [], 'any'), (r0 + ('steps', 'loss'), [None, None], 'any'),
            (r0 + ('steps',), {}, 'any'), (('runs',), [], 'any'), (('specs',), [], 'any'),
            (r0 + ('status',), 'oom', 'any'),
            (r0 + ('final_loss',), None, 'accept'), (r0 + ('epochs', 0, 'train_loss'), None, 'accept'),
            (r0 + ('epochs', 0, 'eval_loss'), None, 'accept'), (r0 + ('final_loss',), -1, 'bad'), (r0 + ('status',), 'diverged', 'any'), (r0 + ('status_detail',), 'x' * 100000, 'any'),
            (r0 + ('model',), '<script>alert(1)</script>', 'any'), (r0 + ('model',), 'a\u202eb\u2028c\x1b[2J', 'any'),
            (r0 + ('model',), 'x' * 100000, 'any'), (r0 + ('precision',), '"><svg onload=alert(1)>', 'any'),
            (('env', 'cpu', 'name'), '</svg><script>alert(1)</script>', 'any'),
            (('provenance', 'commit'), '<script>x</script>', 'any'),
            (r0 + ('flags',), ['<script>'], 'any'),
        ]
        for path, v, exp in anyv:
            both(f'{jpath(path)} = {json.dumps(v)[:40]}', setp(R, path, v), exp)
        for k in sorted(R['runs'][0].keys()):
            both(f'runs[0].{k} deleted', setp(R, r0 + (k,), DEL), 'any', report=not self.quick)
        for k in sorted(R.keys()):
            both(f'{k} deleted', setp(R, (k,), DEL), 'any', history=k == 'provenance')
        self.case(cls, 'report --history of a file without provenance', ['report', '--history', '{s}/r_mlp.json', 'x.json', '--html', 'o.html'],
                  expect='bad', names=('x.json',), setup=lambda d: self.wjson(os.path.join(d, 'x.json'), setp(R, ('provenance',), DEL)))
        for tv in ('garbage', '', '2026-13-45T99:99:99Z'):
            self.case(cls, f'report --history provenance.time_utc = {tv!r}', ['report', '--history', '{s}/r_mlp.json', 'x.json', '--html', 'o.html'],
                      expect='bad', soft=True, outputs=('{d}/o.html',),
                      setup=lambda d, tv=tv: self.wjson(os.path.join(d, 'x.json'), setp(R, ('provenance', 'time_utc'), tv)))
        # raw-text damage
        g = json.dumps(R)
        fl = repr(R['runs'][0]['final_loss'])
        raw = [
            ('NaN token for final_loss', g.replace(f'"final_loss": {fl}', '"final_loss": NaN', 1), 'bad'),
            ('Infinity token for a time', g.replace('"time_ms": ', '"time_ms": Infinity, "x": ', 1), 'bad'),
            ('-Infinity in steps.loss', g.replace('"loss": [', '"loss": [-Infinity, ', 1), 'bad'),
            ('1e999 for final_loss', g.replace(f'"final_loss": {fl}', '"final_loss": 1e999', 1), 'bad'),
            ('trailing garbage', g + ' x', 'bad'),
            ('NUL and a second copy', g + '\0' + g, 'bad'),
            ('two copies', g + g, 'bad'),
            ('empty file', '', 'bad'),
            ('{}', '{}', 'bad'),
            ('[]', '[]', 'bad'),
            ('BOM at start', '\ufeff' + g, 'any'),
            ('duplicate runs key', g.replace('"runs": [', '"runs": [], "runs": [', 1), 'bad'),
            ('duplicate key inside a run', g.replace('"final_accuracy": ', '"final_accuracy": 0.5, "final_accuracy": ', 1), 'bad'),
            ('truncated', g[:len(g) // 2], 'bad'),
            ('invalid UTF-8 in model name', g.replace('"tiny_mlp"', '"tiny\udcffmlp"', 1), 'any'),
        ]
        for label, text, exp in raw:
            b = text.encode('utf-8', 'surrogateescape')
            both(label, b, exp, soft=label.startswith('duplicate'))
        # deep nesting in every object
        objs = [(), ('env',), ('env', 'cpu'), ('provenance',), ('tool',), r0, r0 + ('epoch_time_ms',),
                r0 + ('peak_memory_bytes',), r0 + ('peak_memory_bytes', 'by_category'), r0 + ('predicted_memory_bytes',),
                r0 + ('steps',), r0 + ('epochs', 0), ('specs', 0), ('specs', 0, 'model'), ('specs', 0, 'train', 'optimizer'),
                ('specs', 0, 'loss_scale'), ('specs', 0, 'fp8'), ('specs', 0, 'data')]
        for op in objs:
            both(f'70-deep array in {jpath(op) or "root"}', setp(R, op + ('zz_deep',), json.loads(nest(70))), 'bad', report=not self.quick)
        for op in [(), r0, ('specs', 0, 'model')]:
            both(f'100000-deep objects in {jpath(op) or "root"}', deep_text(R, op + ('zz',), nest(100000, '1', '{"a":', '}')), 'bad', report=not self.quick)
        both('100000 unclosed brackets', '[' * 100000, 'bad')
        # depth boundary: runs[0] is at depth 3 (root object 1, runs array 2)
        both('total depth 62 (accept)', setp(R, r0 + ('zz',), json.loads(nest(59))), 'accept')
        both('total depth 67 (refuse)', setp(R, r0 + ('zz',), json.loads(nest(64))), 'bad')
        both('steps.loss replaced by 70-deep array', setp(R, r0 + ('steps', 'loss'), json.loads(nest(70))), 'bad')
        # huge arrays
        if not self.quick:
            both('epochs with 100000 entries', setp(R, r0 + ('epochs',), R['runs'][0]['epochs'] * 100000), 'any')
            both('steps.loss with 1e6 entries', setp(R, r0 + ('steps', 'loss'), [0.5] * 1000000), 'any')
            both('10000 copies of run 0', setp(R, ('runs',), R['runs'][:1] * 10000), 'any')
            both('flags with 100000 entries', setp(R, r0 + ('flags',), ['noisy'] * 100000), 'any')
        # steps.stride / steps.count
        st = R['runs'][0]['steps']
        n = len(st['loss'])
        for label, upd, exp in [
            ('stride 2, count = entries (too few steps)', {'stride': 2, 'count': n}, 'bad'),
            ('stride 0', {'stride': 0, 'count': n}, 'bad'),
            ('stride -1', {'stride': -1, 'count': n}, 'bad'),
            ('stride 1.5', {'stride': 1.5, 'count': n}, 'bad'),
            ('stride "2"', {'stride': '2', 'count': n}, 'bad'),
            ('stride null', {'stride': None, 'count': n}, 'bad'),
            ('stride 1e18 count 1e18', {'stride': 10 ** 18, 'count': 10 ** 18}, 'bad'),
            ('stride 2^64', {'stride': 2 ** 64, 'count': n}, 'bad'),
            ('count 0', {'stride': 1, 'count': 0}, 'bad'),
            ('count -1', {'stride': 1, 'count': -1}, 'bad'),
            ('count entries+1 with stride 1', {'stride': 1, 'count': n + 1}, 'bad'),
            ('stride only', {'stride': 1}, 'any'),
            ('count only', {'count': n}, 'any'),
            ('stride 1 count = entries (consistent)', {'stride': 1, 'count': n}, 'accept'),
        ]:
            both(f'steps.{label}', setp(R, r0 + ('steps',), dict(st, **upd)), exp, soft=exp == 'bad')
        bk_run = next((i for i, r in enumerate(BK['runs']) if 'stride' in r.get('steps', {})), None)
        if bk_run is None:
            self.skipped.append('bucketed fixture has no steps.stride')
        else:
            bst = BK['runs'][bk_run]['steps']
            for label, upd, exp in [
                ('bucketed: stride 1 (arrays shorter than count)', {'stride': 1}, 'bad'),
                ('bucketed: count 1', {'count': 1}, 'bad'),
                ('bucketed: count + stride (one bucket too many)', {'count': bst['count'] + bst['stride']}, 'bad'),
                ('bucketed: stride deleted', {'stride': DEL}, 'any'),
                ('bucketed: count deleted', {'count': DEL}, 'any'),
                ('bucketed: stride 2^63', {'stride': 2 ** 63}, 'bad'),
            ]:
                nb = dict(bst)
                for k, v in upd.items():
                    if v is DEL:
                        nb.pop(k, None)
                    else:
                        nb[k] = v
                both(label, setp(BK, ('runs', bk_run, 'steps'), nb), exp, soft=exp == 'bad')
        # fp8_scaling
        fi = next((i for i, r in enumerate(F['runs']) if r.get('fp8_scaling')), None)
        if fi is None:
            self.skipped.append('fp8 fixture has no fp8_scaling')
        else:
            fs = F['runs'][fi]['fp8_scaling']
            e0 = fs[0]
            L = len(e0['amax'])
            fr = ('runs', fi, 'fp8_scaling')
            for label, val, exp, sft in [
                ('amax [] (series without steps)', [dict(e0, amax=[])] + fs[1:], 'bad', False),
                ('amax [] and scale []', [dict(e0, amax=[], scale=[])] + fs[1:], 'bad', False),
                ('scale []', [dict(e0, scale=[])] + fs[1:], 'bad', False),
                ('scale one shorter than amax', [dict(e0, scale=e0['scale'][:-1])] + fs[1:], 'bad', True),
                ('amax with null', [dict(e0, amax=[None] + e0['amax'][1:])] + fs[1:], 'any', False),
                ('amax -1', [dict(e0, amax=[-1.0] + e0['amax'][1:])] + fs[1:], 'bad', True),
                ('scale 0 (underflow, legal)', [dict(e0, scale=[0.0] * L)] + fs[1:], 'accept', False),
                ('scale -1', [dict(e0, scale=[-1.0] + e0['scale'][1:])] + fs[1:], 'bad', True),
                ('scale 1e308', [dict(e0, scale=[1e308] * L)] + fs[1:], 'any', False),
                ('amax 5e-324', [dict(e0, amax=[5e-324] * L)] + fs[1:], 'any', False),
                ('clipped_steps -1', [dict(e0, clipped_steps=-1)] + fs[1:], 'bad', True),
                ('clipped_steps > steps', [dict(e0, clipped_steps=10 ** 9)] + fs[1:], 'bad', True),
                ('clipped_steps 1.5', [dict(e0, clipped_steps=1.5)] + fs[1:], 'bad', True),
                ('clipped_steps null', [dict(e0, clipped_steps=None)] + fs[1:], 'bad', True),
                ('format bogus', [dict(e0, format='fp8_e3m4')] + fs[1:], 'bad', True),
                ('format null', [dict(e0, format=None)] + fs[1:], 'bad', True),
                ('tensor ""', [dict(e0, tensor='')] + fs[1:], 'any', False),
                ('tensor with markup and controls', [dict(e0, tensor='<script>\x1b\u202e')] + fs[1:], 'any', False),
                ('entry missing amax', [{k: v for k, v in e0.items() if k != 'amax'}] + fs[1:], 'bad', True),
                ('entry null', [None] + fs[1:], 'bad', False),
                ('entry is a number', [7] + fs[1:], 'bad', False),
                ('fp8_scaling {}', {}, 'bad', False),
                ('fp8_scaling "x"', 'x', 'bad', False),
                ('fp8_scaling []', [], 'accept', False),
                ('10000 entries', fs[:1] * 10000, 'any', False),
                ('amax 100000 entries (longer than steps)', [dict(e0, amax=e0['amax'] * (100000 // L + 1), scale=e0['scale'] * (100000 // L + 1))] + fs[1:], 'any', False),
                ('amax 70-deep nested', [dict(e0, amax=json.loads(nest(70)))] + fs[1:], 'bad', False),
            ]:
                both(f'fp8_scaling: {label}', setp(F, fr, val), exp, soft=sft)
            both('fp8_scaling on an fp32 run', setp(R, r0 + ('fp8_scaling',), fs), 'any')
            both('fp8_scaling with steps.stride 2 (bucketed, inconsistent)', setp(F, ('runs', fi, 'steps'), dict(F['runs'][fi]['steps'], stride=2, count=len(F['runs'][fi]['steps']['loss']))), 'bad', soft=True)
        # profile files
        p0 = ('profiles', 0)
        for label, val_path, v, exp, sft in [
            ('profile ops[0].ms_per_step -1', p0 + ('ops', 0, 'ms_per_step'), -1, 'bad', True),
            ('profile ops[0].ms_per_step null', p0 + ('ops', 0, 'ms_per_step'), None, 'bad', False),
            ('profile ops "x"', p0 + ('ops',), 'x', 'bad', False),
            ('profile ops []', p0 + ('ops',), [], 'any', False),
            ('profile profiles []', ('profiles',), [], 'any', False),
            ('profile ops[0].op markup', p0 + ('ops', 0, 'op'), '<script>alert(1)</script>', 'any', False),
            ('profile ops[0].bytes_per_step 1e308', p0 + ('ops', 0, 'bytes_per_step'), 1e308, 'any', False),
            ('profile ops[0] 70-deep', p0 + ('ops', 0, 'zz'), json.loads(nest(70)), 'bad', False),
        ]:
            sp = setp(P, val_path, v)
            self.case(cls, label + ' [report R P]', ['report', '{s}/r_mlp.json', 'x.json', '--html', 'o.html'], expect=exp, soft=sft,
                      names=('x.json',) if exp == 'bad' else (), setup=lambda d, sp=sp: self.wjson(os.path.join(d, 'x.json'), sp),
                      outputs=('{d}/o.html',), check=self.html_check('o.html'))
        # wrong kind of file
        for f in ['p_mlp.json', 'e_mlp.json', 'm_mlp.json', 'i_mlp.json', 'c_mlp.json', 'mlp.json', 'dx.json']:
            if not self.have(f):
                continue
            self.case(cls, f'compare {f} as a result', ['compare', '{s}/r_mlp.json', '{s}/' + f], expect='bad', names=(f,))
            self.case(cls, f'compare {f} {f}', ['compare', '{s}/' + f, '{s}/' + f], expect='bad', names=(f,))
            # report draws profile, explain and maxbatch files (README); the other kinds are refused.
            if f in ('e_mlp.json', 'm_mlp.json'):
                self.case(cls, f'report {f}', ['report', '{s}/' + f, '--html', 'o.html'], expect='ok',
                          outputs=('{d}/o.html',), check=self.html_check('o.html'))
            elif f != 'p_mlp.json':
                self.case(cls, f'report {f}', ['report', '{s}/' + f, '--html', 'o.html'], expect='bad', names=(f,))
        self.case(cls, 'report --history with a profile', ['report', '--history', '{s}/r_mlp.json', '{s}/p_mlp.json', '--html', 'o.html'], expect='bad', names=('p_mlp.json',))
        self.case(cls, 'run a result file as a spec', ['run', '{s}/r_mlp.json', '--device', 'cpu'], expect='bad', names=('r_mlp.json',))
        self.case(cls, 'validate a profile file', ['validate', '{s}/p_mlp.json'], expect='bad', names=('p_mlp.json',))
        # seeds and repetitions
        if self.have('r_seeds.json', 'r_rep.json'):
            SD = json.load(open(os.path.join(self.S, 'r_seeds.json')))
            RP = json.load(open(os.path.join(self.S, 'r_rep.json')))
            for label, obj, exp, sft in [
                ('seed -1', setp(SD, r0 + ('seed',), -1), 'bad', False),
                ('seed 1.5', setp(SD, r0 + ('seed',), 1.5), 'bad', False),
                ('seed "1"', setp(SD, r0 + ('seed',), '1'), 'bad', False),
                ('seed 2^64', setp(SD, r0 + ('seed',), 2 ** 64), 'bad', False),
                ('seed 2^64-1', setp(SD, r0 + ('seed',), 2 ** 64 - 1), 'any', False),
                ('seed null (reads as no seed)', setp(SD, r0 + ('seed',), None), 'any', False),
                ('seed_summary "x"', setp(SD, ('seed_summary',), 'x'), 'any', False),
                ('seed_summary[0] deep', setp(SD, ('seed_summary', 0, 'zz'), json.loads(nest(70))), 'bad', False),
                ('repetition 0', setp(RP, r0 + ('repetition',), 0), 'bad', True),
                ('repetition -1', setp(RP, r0 + ('repetition',), -1), 'bad', True),
                ('repetition 1e20', setp(RP, r0 + ('repetition',), 1e20), 'bad', True),
                ('repetition duplicated (two runs rep 1)', setp(RP, ('runs', 1, 'repetition'), 1), 'any', False),
                ('1000 repetitions of one run', setp(RP, ('runs',), [dict(RP['runs'][0], repetition=i + 1) for i in range(1000)]), 'accept', False),
            ]:
                both(label, obj, exp, soft=sft)
        # verdicts the README states
        two = len(R['runs']) > 1
        if two:
            cur = setp(R, ('runs', 1, 'status'), 'oom')
            self.case(cls, 'a run ok in the baseline and oom now -> 1', ['compare', '{s}/r_mlp.json', 'x.json'], expect=(1,),
                      setup=lambda d: self.wjson(os.path.join(d, 'x.json'), cur))
            cur2 = setp(setp(R, ('runs', 1, 'status'), 'diverged'), ('runs', 1, 'final_loss'), None)
            self.case(cls, 'a run ok in the baseline and diverged now -> 1', ['compare', '{s}/r_mlp.json', 'x.json'], expect=(1,),
                      setup=lambda d: self.wjson(os.path.join(d, 'x.json'), cur2))
        acc = R['runs'][0]['final_accuracy']
        cur3 = setp(R, r0 + ('final_accuracy',), max(0.0, acc - 0.02))
        self.case(cls, 'accuracy 2 points lower -> 1', ['compare', '{s}/r_mlp.json', 'x.json'], expect=(1,),
                  setup=lambda d: self.wjson(os.path.join(d, 'x.json'), cur3))
        mem = R['runs'][0]['peak_memory_bytes']['training']
        cur4 = setp(R, r0 + ('peak_memory_bytes', 'training'), int(mem * 1.5))
        self.case(cls, 'training memory 1.5x -> 1', ['compare', '{s}/r_mlp.json', 'x.json'], expect=(1,),
                  setup=lambda d: self.wjson(os.path.join(d, 'x.json'), cur4))
        # every output of compare is well-formed, whatever the names in the files
        # A model name is held to the spec's rule; a status detail is free text.
        weird = setp(R, ('runs', 0, 'status_detail'), 'm\x01<&"\'>]]>\u202e\ud7ff\ufffe ]]><x/>\x00')
        def chk_out(r):
            probs = []
            if r.rc not in (0, 1):
                return probs
            import xml.etree.ElementTree as ET
            for fn, kind in (('j.xml', 'xml'), ('c.json', 'json')):
                fp = os.path.join(r.dir, fn)
                if not os.path.exists(fp):
                    probs.append(f'{fn} not written')
                    continue
                try:
                    if kind == 'xml':
                        ET.parse(fp)
                    else:
                        json.load(open(fp, encoding='utf-8'))
                except Exception as e:  # noqa
                    probs.append(f'{fn} is not well-formed {kind}: {str(e)[:100]}')
            return probs
        self.case(cls, 'compare --junit/--json with markup and controls in names: well-formed', ['compare', 'x.json', 'x.json', '--junit', 'j.xml', '--json', 'c.json', '--md', 'c.md'],
                  expect='accept', setup=lambda d: self.wjson(os.path.join(d, 'x.json'), weird), outputs=('{d}/j.xml', '{d}/c.json', '{d}/c.md'), check=chk_out)
        bad_utf8 = json.dumps(setp(R, r0 + ('model',), 'm__BAD__')).encode().replace(b'__BAD__', b'\xff\xfe')
        self.case(cls, 'compare --junit/--json with invalid UTF-8 in a model name', ['compare', 'x.json', 'x.json', '--junit', 'j.xml', '--json', 'c.json'],
                  expect='any', setup=lambda d: self.wbytes(os.path.join(d, 'x.json'), bad_utf8), outputs=('{d}/j.xml', '{d}/c.json'), check=chk_out)
        self.case(cls, 'report with invalid UTF-8 in a model name', ['report', 'x.json', '--html', 'o.html'],
                  expect='any', setup=lambda d: self.wbytes(os.path.join(d, 'x.json'), bad_utf8), outputs=('{d}/o.html',))
        # inputs that are streams
        self.case(cls, 'validate /dev/stdin (a pipe)', ['validate', '/dev/stdin'], expect='bad', stdin_bytes=json.dumps(self.MLP).encode(), timeout=20)
        self.case(cls, 'compare - (dash)', ['compare', '-', '{s}/r_mlp.json'], expect='bad', stdin_bytes=g.encode(), timeout=20)
        self.case(cls, 'run spec - (dash)', ['run', '-', '--device', 'cpu'], expect='bad', stdin_bytes=json.dumps(self.MLP).encode(), timeout=20)
        self.case(cls, 'report --md /dev/full -> 3, html written', ['report', '{s}/r_mlp.json', '--html', 'o.html', '--md', '/dev/full'], expect='io',
                  outputs=('{d}/o.html',), check=lambda r: [] if os.path.isfile(os.path.join(r.dir, 'o.html')) else ['the html was not written'])
        self.case(cls, 'compare --junit /dev/full -> 3', ['compare', '{s}/r_mlp.json', '{s}/r_mlp.json', '--junit', '/dev/full'], expect='io')
        self.case(cls, 'explain --json /dev/full -> 3', ['explain', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--steps', '2', '--json', '/dev/full'], expect='io')
        self.case(cls, 'maxbatch --md /dev/full -> 3', ['maxbatch', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--memory-limit', '1MiB', '--precisions', 'fp32', '--md', '/dev/full'], expect='io')
        self.case(cls, 'data --out /dev/full/x (parent is a device)', ['data', '{s}/mlp.json', '--out', '/dev/full/x'], expect='bad')
        # odd input files
        def mkfifo(d):
            os.mkfifo(os.path.join(d, 'fifo.json'))
        for label, path, setup in [
            ('compare a directory', '{d}', None), ('compare a FIFO (no writer)', 'fifo.json', mkfifo),
            ('compare /dev/zero', '/dev/zero', None), ('compare /dev/urandom', '/dev/urandom', None),
            ('compare /proc/self/status', '/proc/self/status', None), ('compare a missing file', 'nope.json', None),
            ('compare a symlink loop', 'loop.json', lambda d: os.symlink('loop.json', os.path.join(d, 'loop.json'))),
        ]:
            self.case(cls, label, ['compare', '{s}/r_mlp.json', path], expect='bad', setup=setup, timeout=20)
            self.case(cls, label.replace('compare', 'report'), ['report', path, '--html', 'o.html'], expect='bad', setup=setup, timeout=20)
            # the same file as the second of two --current files, paired and not
            for paired in ([], ['--paired']):
                self.case(cls, label + ' as a --current file' + (' (--paired)' if paired else ''),
                          ['compare', '--baseline', '{s}/r_mlp.json', '--baseline', '{s}/r_mlp2.json',
                           '--current', '{s}/r_mlp.json', '--current', path, *paired],
                          expect='bad', setup=setup, timeout=20)
        # through a symlink: accepted, and the link stays
        self.case(cls, 'compare through a symlink', ['compare', 'l.json', 'l.json'], expect='accept',
                  setup=lambda d: os.symlink(os.path.join(self.S, 'r_mlp.json'), os.path.join(d, 'l.json')))
        # > 256 MiB
        if not self.quick:
            def big(d):
                with open(os.path.join(d, 'big.json'), 'wb') as f:
                    f.write(b' ' * (257 << 20))
                    f.write(g.encode())
            self.case(cls, 'result file of 257 MiB (leading blanks)', ['compare', 'big.json', 'big.json'], expect='bad', names=('big.json',), setup=big)

    @staticmethod
    def get(obj, path):
        for k in path:
            obj = obj[k]
        return obj

    def c_cli(self):
        cls = 'cli'
        base = ['run', '{s}/mlp.json', '--device', 'cpu', '--quiet']
        bad = lambda label, args, names=(), soft=False: self.case(cls, label, args, expect='bad', names=names, soft=soft)
        for v in ['0', '-1', '1e3', '99999999999999999999', '010', '0x2', '+1', ' 1', '1 ', '', '1.0', '10001',
                  '4294967297', '\uff11', '1\u200b', '١']:
            bad(f'--epochs {v!r}', base + ['--epochs', v], ('--epochs',))
        self.case(cls, '--epochs=1', base + ['--epochs=1'], expect='ok')
        self.case(cls, '--epochs 10000 with a bad spec after (refused first)', ['run', '{s}/mlp.json', 'nope.json', '--epochs', '10000', '--device', 'cpu'], expect='bad')
        for v in ['0', '-1', '1.5', '16GiBx', 'GiB', '1e9', '0x100', '010', '18446744073709551616',
                  '17179869184TiB', '16EiB', '', '16XB', '1.0000000001KiB', '-0', '+1GiB', '1GiB\t',
                  '0.0000000001GiB', 'nanGiB', 'infGiB', '1,5GiB', '1_000']:
            bad(f'--memory-limit {v!r}', base + ['--memory-limit', v], ('--memory-limit',))
        # Blanks around the size are quoting, and one between number and unit reads as written (cli.cpp).
        for v, exp in [('16gib', 'any'), ('1KiB', 'ok'), ('0.5KiB', 'ok'), ('1B', 'any'), ('1', 'any'), ('15EiB', 'any'),
                       ('1.5GiB', 'ok'), ('16GB', 'ok'), ('1k', 'any'), (' 1GiB', 'ok'), ('1GiB ', 'ok'), ('16 GiB', 'ok')]:
            self.case(cls, f'--memory-limit {v!r}', base + ['--memory-limit', v, '--epochs', '1'], expect=exp)
        for v in ['', ',', 'fp32,', ',fp32', 'fp32,,tf32', 'FP32', 'fp 32', 'fp64', 'fp32;tf32', 'fp\uff13\uff12',
                  'fp32\x1b[31m', 'fp32\u202e', 'fp32,fp32', 'fp32,FP32', 'x' * 100000, 'x' * 300,
                  'amp_fp16\u200b', '\ufefffp32']:
            bad(f'--precisions {v[:30]!r}', base + ['--precisions', v], ('--precisions',))
        for v in ['fp32\t', 'fp32\n', 'fp32\r', '\vfp32']:
            bad(f'--precisions {v!r} (control blank at an end)', base + ['--precisions', v], ('--precisions',), soft=True)
        for v, exp in [('fp32, tf32', 'ok'), ('  fp32  ', 'ok'), ('amp_fp8', 'ok'), ('fp32,tf32,amp_fp16,amp_bf16,amp_fp8', 'ok')]:
            self.case(cls, f'--precisions {v!r}', base + ['--precisions', v], expect=exp)
        for v in ['', '0', '-1', '32,,64', '1e2', '0x10', '010', '1048577', '4294967297', '64,', ',64', 'abc',
                  '4096', '32;64', '18446744073709551616']:
            bad(f'--batch-sizes {v!r}', base + ['--batch-sizes', v], ('--batch-sizes',))
        for v, exp in [('1,1', 'any'), ('32, 64', 'any'), ('2048', 'ok'), ('64,32', 'any')]:
            self.case(cls, f'--batch-sizes {v!r}', base + ['--batch-sizes', v, '--precisions', 'fp32'], expect=exp)
        bad('--batch-size with --batch-sizes', base + ['--batch-size', '32', '--batch-sizes', '32,64'])
        bad('--batch-size 4096 > train_samples', base + ['--batch-size', '4096'], ('4096',))
        bad('--batch-size 0', base + ['--batch-size', '0'])
        for v in ['0', '1001', '-1', '2.5', '', '4294967297']:
            bad(f'--repeat {v!r}', base + ['--repeat', v], ('--repeat',))
        for v in ['1', '0', '1001', '-2', '2.0']:
            bad(f'--seeds {v!r}', base + ['--seeds', v], ('--seeds',))
        for v in ['-1', '4611686018427387905', '18446744073709551615', '18446744073709551616', '1e3', '0x1', '01']:
            bad(f'--seed {v!r}', base + ['--seed', v], ('--seed',))
        for v in ['gpu', 'CPU', '', 'cpu ', 'cuda:0', '\x1b[2J']:
            bad(f'--device {v!r}', ['run', '{s}/mlp.json', '--device', v], ('--device',))
        self.case(cls, '--device cuda without a GPU is bad input', ['run', '{s}/mlp.json', '--device', 'cuda', '--quiet'],
                  expect='bad', soft=False, check=None)
        bad('--json twice', base + ['--json', 'a.json', '--json', 'b.json'])
        bad('--device twice', ['run', '{s}/mlp.json', '--device', 'cpu', '--device', 'cpu'])
        bad('--precisions twice', base + ['--precisions', 'fp32', '--precisions', 'tf32'])
        bad('--epochs twice (same value)', base + ['--epochs', '1', '--epochs', '1'])
        self.case(cls, '--quiet twice', base + ['--quiet', '--epochs', '1'], expect='any')
        self.case(cls, '--cuda-graphs on the CPU', base + ['--cuda-graphs', '--epochs', '1'], expect='any')
        bad('unknown --bogus', base + ['--bogus'], ('--bogus',))
        bad('unknown -x', base + ['-x'])
        bad('--jsonx', base + ['--jsonx', 'a'])
        bad('--json= (empty)', base + ['--json='])
        bad('--json -', base + ['--json', '-'])
        bad('--json missing value', base + ['--json'])
        bad('--versionx', ['--versionx'], ('--versionx',))
        self.case(cls, '--version', ['--version'], expect='ok')
        self.case(cls, '--version extra', ['--version', 'extra'], expect='any')
        self.case(cls, '--help', ['--help'], expect='ok')
        self.case(cls, 'no command', [], expect='any')
        bad('unknown command rn', ['rn', '{s}/mlp.json'], ('rn',))
        bad('command RUN', ['RUN', '{s}/mlp.json'])
        bad('empty command', [''])
        bad('command with ESC', ['\x1b]0;pwned\x07'])
        bad('run without spec', ['run', '--device', 'cpu'])
        bad('validate without spec', ['validate'])
        self.case(cls, 'spec named like an option (./-q.json)', ['run', './-q.json', '--device', 'cpu', '--quiet'], expect='ok',
                  setup=lambda d: self.wjson(os.path.join(d, '-q.json'), self.MLP))
        self.case(cls, 'spec after --', ['run', '--device', 'cpu', '--quiet', '--', '-q.json'], expect='ok',
                  setup=lambda d: self.wjson(os.path.join(d, '-q.json'), self.MLP))
        bad('10000 spec arguments (same file)', ['run'] + ['{s}/mlp.json'] * 10000 + ['--device', 'cpu'], ('mlp.json',))
        bad('option value with 5000 bytes', base + ['--epochs', '9' * 5000], ('--epochs',))
        bad('option value with controls', base + ['--memory-limit', '1\x1b[31m\r\x00'[:-1] + 'GiB'], ('--memory-limit',))
        bad('option value with invalid UTF-8', base + [b'--memory-limit', b'1\xff\xfeGiB'], ('--memory-limit',))
        bad('option value with U+2028', base + ['--epochs', '1\u20282'], ('--epochs',))
        # compare options
        if self.have('r_mlp.json'):
            cb = ['compare', '{s}/r_mlp.json', '{s}/r_mlp.json']
            for v in ['5%%', '%5', '-5', '1e1', 'nan', 'inf', '', '5 %', '05', '1e308', '0x10', '-0', '5%5', '١٠', '5\u066a']:
                bad(f'--time-threshold {v!r}', cb + ['--time-threshold', v], ('--time-threshold',))
            for v, exp in [('5%', 'accept'), ('5', 'accept'), ('0', 'accept'), ('0%', 'accept'), ('.5', 'any'),
                           ('5.', 'any'), ('100000000%', 'any'), ('0.0000001', 'accept'), ('99999999999999999999', 'any')]:
                self.case(cls, f'--time-threshold {v!r}', cb + ['--time-threshold', v], expect=exp)
            bad('--memory-threshold -1', cb + ['--memory-threshold', '-1'], ('--memory-threshold',))
            bad('--accuracy-threshold nan', cb + ['--accuracy-threshold', 'nan'], ('--accuracy-threshold',))
            self.case(cls, '--accuracy-threshold 101', cb + ['--accuracy-threshold', '101'], expect='any')
            bad('--loss-threshold ""', cb + ['--loss-threshold', ''], ('--loss-threshold',))
            bad('--time-threshold twice', cb + ['--time-threshold', '5', '--time-threshold', '5'])
            self.case(cls, '--strict', cb + ['--strict'], expect=(0, 4))
            bad('compare with one file', ['compare', '{s}/r_mlp.json'])
            bad('compare with three files', cb + ['{s}/r_mlp.json'])
            bad('compare --baseline without current', ['compare', '--baseline', '{s}/r_mlp.json'])
            bad('compare --baseline and two positionals', ['compare', '--baseline', '{s}/r_mlp.json', '{s}/r_mlp.json', '{s}/r_mlp.json'])
            self.case(cls, 'compare --baseline quoted glob', ['compare', '--baseline', '{s}/r_mlp?.json', '{s}/r_mlp.json'], expect='accept')
            bad('compare --baseline glob holding the current file', ['compare', '--baseline', '{s}/r_mlp*.json', '{s}/r_mlp.json'])
            bad('compare --baseline glob matching nothing', ['compare', '--baseline', '{s}/zz*.json', '{s}/r_mlp.json'])
            bad('report without --html', ['report', '{s}/r_mlp.json'])
            bad('report --html ""', ['report', '{s}/r_mlp.json', '--html', ''])
            bad('report no files', ['report', '--html', 'x.html'])
        # other commands' options
        bad('inspect --depth bogus', ['inspect', '{s}/mlp.json', '--depth', 'bogus'], ('--depth',))
        bad('inspect --precision fp64', ['inspect', '{s}/mlp.json', '--precision', 'fp64'])
        self.case(cls, 'inspect --precision amp_fp8', ['inspect', '{s}/mlp.json', '--precision', 'amp_fp8'], expect='ok')
        pb = ['profile', '{s}/mlp.json', '--device', 'cpu', '--quiet']
        for label, a in [('--steps 0', ['--steps', '0']), ('--steps 4294967297', ['--steps', '4294967297']),
                         ('--top -1', ['--top', '-1']), ('--batch-size 0', ['--batch-size', '0']),
                         ('--steps 1e2', ['--steps', '1e2'])]:
            bad('profile ' + label, pb + a)
        self.case(cls, 'profile --top 0', pb + ['--top', '0', '--steps', '2'], expect='any')
        self.case(cls, 'profile --top 4294967297', pb + ['--top', '4294967297', '--steps', '2'], expect='any')
        self.case(cls, 'profile two specs', ['profile', '{s}/mlp.json', '{s}/tr.json', '--device', 'cpu'], expect='bad')
        mb = ['maxbatch', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--precisions', 'fp32']
        bad('maxbatch --multiple 0', mb + ['--multiple', '0', '--memory-limit', '1MiB'])
        bad('maxbatch --multiple -1', mb + ['--multiple', '-1', '--memory-limit', '1MiB'])
        bad('maxbatch --steps 0', mb + ['--steps', '0', '--memory-limit', '1MiB'])
        self.case(cls, 'maxbatch --multiple 3', mb + ['--multiple', '3', '--memory-limit', '1MiB'], expect='ok')
        self.case(cls, 'maxbatch --multiple 4294967297', mb + ['--multiple', '4294967297', '--memory-limit', '1MiB'], expect='any')
        self.case(cls, 'maxbatch --memory-limit 1 (nothing fits)', mb + ['--memory-limit', '1'], expect='any')
        eb = ['explain', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--steps', '2']
        self.case(cls, 'explain one mode', eb + ['--precisions', 'fp32'], expect='any')
        self.case(cls, 'explain --memory-limit 1KiB (fp32 oom)', eb + ['--memory-limit', '1KiB'], expect='any')
        bad('data --out ""', ['data', '{s}/mlp.json', '--out', ''])
        bad('data without --out', ['data', '{s}/mlp.json'])
        bad('data --seed -1', ['data', '{s}/mlp.json', '--out', 'x', '--seed', '-1'])
        self.case(cls, 'devices --json', ['devices', '--json'], expect='any')
        self.case(cls, 'devices extra', ['devices', 'extra'], expect='bad')

    def c_outpath(self):
        cls = 'outpath'
        base = ['run', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--precisions', 'fp32']
        bad = lambda label, args, setup=None, names=(), soft=False: self.case(cls, label, args, expect='bad', setup=setup, names=names, soft=soft)
        mkdir = lambda n: (lambda d: os.mkdir(os.path.join(d, n)))
        bad('--json an existing directory', base + ['--json', 'out'], mkdir('out'), ('out',))
        bad('--json DIR/ (trailing slash, missing)', base + ['--json', 'nodir/'])
        bad('--json parent missing', base + ['--json', 'nodir/out.json'])
        bad('--json parent is a file', base + ['--json', 'f/out.json'], lambda d: self.wbytes(os.path.join(d, 'f'), b'x'))
        bad('--json trailing slash on a file', base + ['--json', 'f/'], lambda d: self.wbytes(os.path.join(d, 'f'), b'x'))
        bad('--json /proc/self/x.json', base + ['--json', '/proc/self/x.json'])
        bad('--json /proc/self/status', base + ['--json', '/proc/self/status'])
        bad('--json /sys/x.json', base + ['--json', '/sys/x.json'])
        bad('--json /proc/self/fd/ (a dir)', base + ['--json', '/proc/self/fd/'])
        bad('--json symlink loop (self)', base + ['--json', 'loop'], lambda d: os.symlink('loop', os.path.join(d, 'loop')))
        bad('--json two-link cycle', base + ['--json', 'a'], lambda d: (os.symlink('b', os.path.join(d, 'a')), os.symlink('a', os.path.join(d, 'b'))))
        bad('--json link to a missing dir', base + ['--json', 'l'], lambda d: os.symlink('nodir/x.json', os.path.join(d, 'l')))
        bad('--json link to a directory', base + ['--json', 'l'], lambda d: (os.mkdir(os.path.join(d, 'dd')), os.symlink('dd', os.path.join(d, 'l'))))
        self.case(cls, '--json dangling symlink: written through, stays a link', base + ['--json', 'l'], expect='ok',
                  setup=lambda d: os.symlink('target.json', os.path.join(d, 'l')), outputs=('{d}/l',),
                  check=lambda r: [] if os.path.islink(os.path.join(r.dir, 'l')) and os.path.isfile(os.path.join(r.dir, 'target.json')) else ['target not written through the link'])
        self.case(cls, '--json link to existing file: target updated, link stays', base + ['--json', 'l'], expect='ok',
                  setup=lambda d: (self.wbytes(os.path.join(d, 'old.json'), b'old'), os.symlink('old.json', os.path.join(d, 'l'))),
                  outputs=('{d}/old.json',),
                  check=lambda r: [] if open(os.path.join(r.dir, 'old.json'), 'rb').read(1) == b'{' else ['target not updated'])
        self.case(cls, '--json link chain of 3 to existing file', base + ['--json', 'l1'], expect='ok',
                  setup=lambda d: (self.wbytes(os.path.join(d, 'old.json'), b'old'), os.symlink('old.json', os.path.join(d, 'l3')),
                                   os.symlink('l3', os.path.join(d, 'l2')), os.symlink('l2', os.path.join(d, 'l1'))),
                  outputs=('{d}/old.json',))
        self.case(cls, '--json keeps the permissions of an existing file', base + ['--json', 'o.json'], expect='ok',
                  setup=lambda d: (self.wbytes(os.path.join(d, 'o.json'), b'old'), os.chmod(os.path.join(d, 'o.json'), 0o640)),
                  outputs=('{d}/o.json',),
                  check=lambda r: [] if stat.S_IMODE(os.stat(os.path.join(r.dir, 'o.json')).st_mode) == 0o640 else ['permissions not kept'])
        bad('--json name of 256 bytes', base + ['--json', 'n' * 256])
        bad('--json name of 250 bytes (.tmp.PID pushes past 255)', base + ['--json', 'n' * 250])
        self.case(cls, '--json name of 200 bytes', base + ['--json', 'n' * 200], expect='ok', outputs=())
        bad('--json path of 5000 bytes', base + ['--json', '/'.join(['d' * 200] * 25)])
        bad('--json ""', base + ['--json', ''])
        bad('--csv ""', base + ['--csv', ''])
        bad('--json X --csv X', base + ['--json', 'x', '--csv', 'x'])
        bad('--json X --md ./X', base + ['--json', 'x', '--md', './x'])
        bad('--json X --md sub/../X', base + ['--json', 'x', '--md', 'sub/../x'], mkdir('sub'))
        bad('--json X --csv symlink-to-X', base + ['--json', 'x', '--csv', 'l'], lambda d: (self.wbytes(os.path.join(d, 'x'), b'old'), os.symlink('x', os.path.join(d, 'l'))))
        bad('--json X --csv hardlink-of-X', base + ['--json', 'x', '--csv', 'h'], lambda d: (self.wbytes(os.path.join(d, 'x'), b'old'), os.link(os.path.join(d, 'x'), os.path.join(d, 'h'))))
        bad('--json X --csv dangling-link-to-X (X absent)', base + ['--json', 'x', '--csv', 'l'], lambda d: os.symlink('x', os.path.join(d, 'l')))
        bad('--json abs path and --md relative, same file', base + ['--json', '{d}/x', '--md', 'x'])
        self.case(cls, '--md /dev/null --json /dev/null (a device is written into)', base + ['--md', '/dev/null', '--json', '/dev/null'], expect='ok')
        def spec_here(d):
            self.wjson(os.path.join(d, 's.json'), self.MLP)
        srun = ['run', 's.json', '--device', 'cpu', '--quiet', '--precisions', 'fp32']
        bad('run s.json --json s.json', srun + ['--json', 's.json'], spec_here, ('s.json',))
        bad('run s.json --md ./sub/../s.json', srun + ['--md', './sub/../s.json'], lambda d: (spec_here(d), os.mkdir(os.path.join(d, 'sub'))))
        bad('run s.json --csv symlink-to-s.json', srun + ['--csv', 'l'], lambda d: (spec_here(d), os.symlink('s.json', os.path.join(d, 'l'))))
        bad('run s.json --json hardlink-of-s.json', srun + ['--json', 'h'], lambda d: (spec_here(d), os.link(os.path.join(d, 's.json'), os.path.join(d, 'h'))))
        bad('run via symlink spec --json the real file', ['run', 'l', '--device', 'cpu', '--quiet', '--json', 's.json'], lambda d: (spec_here(d), os.symlink('s.json', os.path.join(d, 'l'))))
        bad('profile s.json --json s.json', ['profile', 's.json', '--device', 'cpu', '--quiet', '--json', 's.json'], spec_here)
        bad('explain s.json --md s.json', ['explain', 's.json', '--device', 'cpu', '--quiet', '--md', 's.json'], spec_here)
        bad('inspect s.json --json s.json', ['inspect', 's.json', '--json', 's.json'], spec_here)
        bad('maxbatch s.json --csv s.json', ['maxbatch', 's.json', '--device', 'cpu', '--memory-limit', '1MiB', '--csv', 's.json'], spec_here)
        bad('data s.json --out s (writes s.json: the input)', ['data', 's.json', '--out', 's'], spec_here, soft=False)
        bad('data --out into a missing dir', ['data', '{s}/mlp.json', '--out', 'nodir/x'])
        bad('data --out /proc/self/x', ['data', '{s}/mlp.json', '--out', '/proc/self/x'])
        self.case(cls, 'data --out through a dangling link for the index', ['data', '{s}/mlp.json', '--out', 'x'], expect='ok',
                  setup=lambda d: os.symlink('idx-target.json', os.path.join(d, 'x.json')), outputs=('{d}/x.json',))
        if self.have('r_mlp.json'):
            def two(d):
                shutil.copy(os.path.join(self.S, 'r_mlp.json'), os.path.join(d, 'a.json'))
                shutil.copy(os.path.join(self.S, 'r_mlp2.json'), os.path.join(d, 'b.json'))
                shutil.copy(os.path.join(self.S, 'p_mlp.json'), os.path.join(d, 'p.json'))
            bad('compare a b --json a', ['compare', 'a.json', 'b.json', '--json', 'a.json'], two, ('a.json',))
            bad('compare a b --md b', ['compare', 'a.json', 'b.json', '--md', 'b.json'], two)
            bad('compare --baseline a b --junit a', ['compare', '--baseline', 'a.json', 'b.json', '--junit', 'a.json'], two)
            bad('compare a b --json x --junit x', ['compare', 'a.json', 'b.json', '--json', 'x', '--junit', 'x'], two)
            bad('report a --html a', ['report', 'a.json', '--html', 'a.json'], two)
            bad('report a p --md p', ['report', 'a.json', 'p.json', '--html', 'o.html', '--md', 'p.json'], two)
            bad('report a --html hardlink-of-a', ['report', 'a.json', '--html', 'h'], lambda d: (two(d), os.link(os.path.join(d, 'a.json'), os.path.join(d, 'h'))))
            bad('report a --html X --md X', ['report', 'a.json', '--html', 'x', '--md', 'x'], two)
            bad('report a --html a-directory', ['report', 'a.json', '--html', 'dd'], lambda d: (two(d), os.mkdir(os.path.join(d, 'dd'))))
            bad('report --history a b --html b', ['report', '--history', 'a.json', 'b.json', '--html', 'b.json'], two)
            bad('report --html /proc/x.html', ['report', 'a.json', '--html', '/proc/x.html'], two)
            self.case(cls, 'report --html /dev/null', ['report', 'a.json', '--html', '/dev/null'], expect='ok', setup=two)
        # existing outputs untouched on a refusal
        def precious(d):
            for n in ('out.json', 'out.csv', 'out.md'):
                self.wbytes(os.path.join(d, n), b'precious ' + n.encode())
            self.wjson(os.path.join(d, 'bad.json'), setp(self.MLP, ('model', 'hidden'), [32, -3]))
        o3 = ['--json', 'out.json', '--csv', 'out.csv', '--md', 'out.md']
        bad('existing outputs untouched: bad spec', ['run', 'bad.json', '--device', 'cpu'] + o3, precious, ('model.hidden[1]',))
        bad('existing outputs untouched: bad option', ['run', '{s}/mlp.json', '--device', 'cpu', '--epochs', '0'] + o3, precious)
        bad('existing outputs untouched: one output bad', ['run', '{s}/mlp.json', '--device', 'cpu', '--json', 'out.json', '--csv', '/proc/x.csv'], precious)
        bad('existing outputs untouched: a later spec bad', ['run', '{s}/mlp.json', 'bad.json', '--device', 'cpu'] + o3, precious)
        # devices and streams
        self.case(cls, '--json /dev/null', base + ['--json', '/dev/null'], expect='ok')
        self.case(cls, '--md /dev/stdout', base + ['--md', '/dev/stdout'], expect='ok',
                  check=lambda r: [] if b'|' in r.out else ['markdown not on stdout'])
        self.case(cls, '--json /dev/stderr', base + ['--json', '/dev/stderr'], expect='ok')
        self.case(cls, '--json /dev/full -> exit 3', base + ['--json', '/dev/full'], expect='io')
        self.case(cls, '--csv /dev/full with --json ok.json -> 3, json written', base + ['--csv', '/dev/full', '--json', 'ok.json'],
                  expect='io', check=lambda r: [] if os.path.isfile(os.path.join(r.dir, 'ok.json')) else ['the other output was not written'])
        self.case(cls, 'stdout is /dev/full -> 3 and --json written', base + ['--json', 'ok.json'], expect='io', stdout_mode='full',
                  check=lambda r: ([] if os.path.isfile(os.path.join(r.dir, 'ok.json')) else ['--json not written']) +
                  ([] if b'No space left' in r.err else ['soft: message does not say No space left on device']))
        self.case(cls, 'stdout closed -> 3', base, expect='io', stdout_mode='closed',
                  check=lambda r: [] if b'closed' in r.err else ['soft: message does not say it is closed'])
        self.case(cls, 'stdout a broken pipe -> 3 (SIGPIPE ignored)', base, expect='io', stdout_mode='broken',
                  check=lambda r: [] if b'Broken pipe' in r.err else ['soft: message does not say Broken pipe'])
        self.case(cls, 'compare with stdout a broken pipe', ['compare', '{s}/r_mlp.json', '{s}/r_mlp.json'], expect='io', stdout_mode='broken')
        self.case(cls, 'validate with stdout /dev/full', ['validate', '{s}/mlp.json'], expect='io', stdout_mode='full')
        self.case(cls, 'devices with stdout closed', ['devices'], expect='io', stdout_mode='closed')
        self.case(cls, '--json to a FIFO with a reader', base + ['--json', 'fifo'], expect='ok',
                  setup=lambda d: os.mkfifo(os.path.join(d, 'fifo')), fifo_reader='{d}/fifo',
                  check=lambda r: [] if r.ctx.get('fifo_box', {}).get('data', b'')[:1] == b'{' else ['FIFO reader got no JSON'])
        def sock(d):
            s = socket.socket(socket.AF_UNIX)
            s.bind(os.path.join(d, 'sock'))
            s.close()
        bad('--json onto a UNIX socket', base + ['--json', 'sock'], sock)
        self.case(cls, '--json relative in a removed cwd (rmdir before exec)', ['run', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--json', 'out.json'],
                  expect='bad', setup=lambda d: os.mkdir(os.path.join(d, 'gone')), cwd='{d}/gone', rmcwd=True)
        self.case(cls, '--json name with a newline', base + ['--json', 'a\nb.json'], expect='ok')
        self.case(cls, '--json name with invalid UTF-8', base + [b'--json', b'a\xff.json'], expect='ok')
        self.case(cls, 'spec file name with invalid UTF-8, --json', [b'run', b's\xff.json', b'--device', b'cpu', b'--quiet', b'--json', b'o.json'],
                  expect='ok', setup=lambda d: self.wjson(os.path.join(os.fsencode(d), b's\xff.json'), self.MLP), outputs=('{d}/o.json',))
        self.case(cls, 'spec file name with invalid UTF-8, bad spec (message escapes \\xNN)', [b'run', b's\xfe.json', b'--device', b'cpu'],
                  expect='bad', setup=lambda d: self.wjson(os.path.join(os.fsencode(d), b's\xfe.json'), setp(self.MLP, ('model', 'hidden'), [-1])),
                  check=lambda r: [] if b'\\xfe' in r.err.lower() else ['soft: the file name byte is not shown as \\xNN'])
        self.case(cls, 'profile --json name with invalid UTF-8', ['profile', '{s}/mlp.json', '--device', 'cpu', '--quiet', '--steps', '2', b'--json', b'p\xff.json'], expect='ok')
        self.case(cls, 'compare of files named with invalid UTF-8, --json', [b'compare', b'a\xff.json', b'a\xff.json', b'--json', b'c.json'], expect='accept',
                  setup=lambda d: shutil.copy(os.path.join(self.S, 'r_mlp.json'), os.path.join(os.fsencode(d), b'a\xff.json')), outputs=('{d}/c.json',))
        self.case(cls, 'report of a file named with invalid UTF-8', [b'report', b'a\xff.json', b'--html', b'o.html'], expect='accept',
                  setup=lambda d: shutil.copy(os.path.join(self.S, 'r_mlp.json'), os.path.join(os.fsencode(d), b'a\xff.json')), outputs=('{d}/o.html',))
        self.case(cls, 'inspect --json name with invalid UTF-8', ['inspect', '{s}/mlp.json', b'--json', b'i\xff.json'], expect='ok')
        self.case(cls, 'data --out prefix with invalid UTF-8', ['data', '{s}/mlp.json', b'--out', b'x\xff'], expect='ok')
        self.case(cls, '--json name with U+202E', base + ['--json', 'a\u202eb.json'], expect='ok')
        bad('--json into a missing dir named with controls (message escaped)', base + ['--json', 'no\x1b[31m\u2028dir/x.json'])
        bad('--json ~/x (no tilde expansion: missing dir)', base + ['--json', '~/x.json'])
        self.case(cls, 'same --json as an earlier case output (overwrite existing)', base + ['--json', 'o.json'], expect='ok',
                  setup=lambda d: self.wbytes(os.path.join(d, 'o.json'), b'{}'), outputs=('{d}/o.json',))

    def c_idx(self):
        cls = 'idx'
        M = self.MLP
        spec = setp(setp(M, ('data',), {'type': 'idx', 'train_images': 'tri', 'train_labels': 'trl', 'eval_images': 'evi',
                                        'eval_labels': 'evl', 'train_samples': 256, 'eval_samples': 64}), ('precisions',), ['fp32'])

        def mk(files=None, sp=None, links=None, fifos=(), subdir=None):
            def setup(d):
                base_files = {'tri': idx_images(256, 8, 8), 'trl': idx_labels(256), 'evi': idx_images(64, 8, 8), 'evl': idx_labels(64)}
                base_files.update(files or {})
                for n, b in base_files.items():
                    if b is None:
                        continue
                    if b == 'dir':
                        os.mkdir(os.path.join(d, n))
                    else:
                        self.wbytes(os.path.join(d, n), b)
                for n, t in (links or {}).items():
                    os.symlink(t, os.path.join(d, n))
                for n in fifos:
                    os.mkfifo(os.path.join(d, n))
                self.wjson(os.path.join(d, 'spec.json'), sp if sp is not None else spec)
            return setup

        def pair(label, setup, expect, names=(), soft=False, roundtrip=False):
            v = self.case(cls, label + ' [validate]', ['validate', 'spec.json'], expect=expect, setup=setup, names=names, soft=soft, timeout=20)
            ra = ['run', 'spec.json', '--device', 'cpu', '--quiet'] + (['--json', 'o.json'] if roundtrip else [])
            r = self.case(cls, label + ' [run]', ra, expect={'ok': 'ok'}.get(expect, expect), setup=setup, names=names, soft=soft,
                          timeout=20, outputs=('{d}/o.json',))
            if v is not None and r is not None and v.rc is not None and r.rc is not None and v.rc >= 0 and r.rc >= 0 \
                    and not v.timed_out and not r.timed_out:
                self.n += 1
                st = self.per_class.setdefault('agree', [0, 0])
                st[0] += 1
                if (v.rc == 2) != (r.rc == 2):
                    self.defects.append(dict(cls='agree', name='idx: ' + label, cmd=f'validate -> {v.rc}; run -> {r.rc}',
                                             expected='validate and run agree', rc=r.rc, elapsed=r.elapsed,
                                             stderr=f'validate: {v.errs[:150]} | run: {r.errs[:150]}',
                                             problems=[f'validate exit {v.rc}, run exit {r.rc}']))
                else:
                    st[1] += 1
                    self.held += 1
            if roundtrip and r is not None and r.rc == 0:
                self.roundtrip('idx ' + label, os.path.join(r.dir, 'o.json'))
            # data export of the same spec
            return r

        pair('valid idx', mk(), 'ok', roundtrip=True)
        pair('valid idx through ../ and symlinks', mk(links={'L': 'tri'}, sp=setp(spec, ('data', 'train_images'), './sub/../L'), files={'sub': 'dir'}), 'ok')
        pair('train_samples below the file count', mk(sp=setp(spec, ('data', 'train_samples'), 100)), 'ok')
        pair('train_samples above the file count', mk(sp=setp(spec, ('data', 'train_samples'), 300)), 'bad', ('train_samples',))
        for label, files, exp, names, soft in [
            ('images truncated by one byte', {'tri': idx_images(256, 8, 8)[:-1]}, 'bad', ('tri',), False),
            ('images header only (8 bytes)', {'tri': idx_images(256, 8, 8)[:8]}, 'bad', ('tri',), False),
            ('images empty file', {'tri': b''}, 'bad', ('tri',), False),
            ('images wrong magic (labels magic)', {'tri': idx_images(256, 8, 8, magic=0x801)}, 'bad', ('tri',), False),
            ('images float type 0x0D03', {'tri': idx_images(256, 8, 8, magic=0xD03)}, 'bad', ('tri',), False),
            ('images magic with nonzero first bytes', {'tri': idx_images(256, 8, 8, magic=0x01000803)}, 'bad', ('tri',), False),
            ('images little-endian header', {'tri': struct.pack('<IIII', 0x803, 256, 8, 8) + bytes(256 * 64)}, 'bad', ('tri',), False),
            ('images count 2^31 in a small file', {'tri': idx_images(256, 8, 8, count=2 ** 31)}, 'bad', ('tri',), False),
            ('images count 2^32-1', {'tri': idx_images(256, 8, 8, count=2 ** 32 - 1)}, 'bad', ('tri',), False),
            ('images count 0', {'tri': idx_images(0, 8, 8)}, 'bad', ('tri',), False),
            ('images 7x9 (63 != input_dim 64)', {'tri': idx_images(256, 7, 9)}, 'bad', ('tri',), False),
            ('images rows 0', {'tri': idx_images(256, 0, 8, pixels=bytes(256 * 64))}, 'bad', ('tri',), False),
            ('images rows*cols wraps to 64 in 32 bits', {'tri': idx_images(256, 0x80000002, 0x20, pixels=bytes(256 * 64))}, 'bad', ('tri',), False),
            ('images rows 65536 cols 65536', {'tri': idx_images(256, 65536, 65536, pixels=bytes(256 * 64))}, 'bad', ('tri',), False),
            ('images 4 dims magic 0x804', {'tri': struct.pack('>IIIII', 0x804, 256, 8, 8, 1) + bytes(256 * 64)}, 'bad', ('tri',), False),
            ('images trailing extra bytes', {'tri': idx_images(256, 8, 8) + b'xx'}, 'bad', ('tri',), True),
            ('labels trailing extra bytes', {'trl': idx_labels(256) + b'x'}, 'bad', ('trl',), True),
            ('labels wrong magic', {'trl': idx_labels(256, magic=0x803)}, 'bad', ('trl',), False),
            ('label == num_classes', {'trl': idx_labels(256, labels=bytes([0] * 255 + [4]))}, 'bad', ('trl',), False),
            ('label 255', {'trl': idx_labels(256, labels=bytes([255] + [0] * 255))}, 'bad', ('trl',), False),
            ('eval label out of range', {'evl': idx_labels(64, labels=bytes([9] * 64))}, 'bad', ('evl',), False),
            ('labels count 255 vs 256 images', {'trl': idx_labels(255)}, 'bad', ('trl',), False),
            ('labels count header 256, file truncated', {'trl': idx_labels(256)[:-10]}, 'bad', ('trl',), False),
            ('labels count 2^32-1', {'trl': idx_labels(256, count=2 ** 32 - 1)}, 'bad', ('trl',), False),
            ('eval images 8x8 but train 4x16', {'tri': idx_images(256, 4, 16)}, 'any', (), False),
            ('images path is a directory', {'tri': 'dir'}, 'bad', ('tri',), False),
            ('images missing', {'tri': None}, 'bad', ('tri',), False),
        ]:
            pair(label, mk(files=files), exp, names, soft)
        pair('images path is a FIFO (no writer)', mk(files={'tri': None}, fifos=('tri',)), 'bad', ('tri',))
        pair('images path is /dev/zero', mk(sp=setp(spec, ('data', 'train_images'), '/dev/zero')), 'bad', ('/dev/zero',))
        pair('images path is a symlink loop', mk(files={'tri': None}, links={'tri': 'tri'}), 'bad', ('tri',))
        pair('images path ""', mk(sp=setp(spec, ('data', 'train_images'), '')), 'bad', ('train_images',))
        pair('images path with NUL', mk(sp=setp(spec, ('data', 'train_images'), 'tri\u0000x')), 'bad', ('train_images',))
        pair('images and labels the same file', mk(sp=setp(spec, ('data', 'train_labels'), 'tri')), 'bad', ())
        pair('labels file used as images', mk(sp=setp(spec, ('data', 'train_images'), 'trl')), 'bad', ())
        pair('missing eval_labels key', mk(sp=setp(spec, ('data', 'eval_labels'), DEL)), 'bad', ('eval_labels',))
        pair('unknown key in idx data', mk(sp=setp(spec, ('data', 'path'), 'x')), 'bad', ('data.path',))
        pair('idx with a seed key', mk(sp=setp(spec, ('data', 'seed'), 3)), 'any')
        pair('idx path absolute', lambda d: (mk(sp=setp(spec, ('data', 'train_images'), os.path.join(d, 'tri')))(d)), 'ok')
        tr_idx = setp(self.TR, ('data',), spec['data'])
        rn_idx = setp(self.RN, ('data',), spec['data'])
        pair('idx for a transformer spec', mk(sp=tr_idx), 'bad', ('data',))
        pair('idx for a resnet spec', mk(sp=rn_idx), 'bad', ('data',))
        pair('idx for a transformer, files missing too', mk(sp=tr_idx, files={'tri': None}), 'bad', ())
        self.case(cls, 'data export of an idx spec', ['data', 'spec.json', '--out', 'exp'], expect='ok', setup=mk(), outputs=())
        self.case(cls, 'data export of an idx spec with bad labels', ['data', 'spec.json', '--out', 'exp'], expect='bad',
                  setup=mk(files={'trl': idx_labels(256, labels=bytes([7] * 256))}))
        self.case(cls, 'profile of an idx spec with bad labels', ['profile', 'spec.json', '--device', 'cpu', '--quiet'], expect='bad',
                  setup=mk(files={'trl': idx_labels(256, labels=bytes([7] * 256))}))
        self.case(cls, 'maxbatch of an idx spec with bad magic', ['maxbatch', 'spec.json', '--device', 'cpu', '--memory-limit', '1MiB'], expect='bad',
                  setup=mk(files={'tri': idx_images(256, 8, 8, magic=0x999)}))
        self.case(cls, 'inspect of an idx spec with missing files', ['inspect', 'spec.json'], expect='any', setup=mk(files={'tri': None}))
        self.case(cls, 'explain of an idx spec with truncated images', ['explain', 'spec.json', '--device', 'cpu', '--steps', '2', '--quiet'], expect='bad',
                  setup=mk(files={'tri': idx_images(256, 8, 8)[:-100]}))

    def c_late(self):
        cls = 'late'
        if not self.have('slow.json'):
            return
        def bad_specs(d):
            self.wjson(os.path.join(d, 'bad.json'), setp(self.MLP, ('model', 'hidden'), [32, -3]))
            self.wjson(os.path.join(d, 'dup.json'), self.SLOW)
            self.wjson(os.path.join(d, 'layers.json'), setp(self.MLP, ('fp32_layers',), ['nonexistent']))
            self.wjson(os.path.join(d, 'heads.json'), setp(self.TR, ('model', 'heads'), 3))
            self.wjson(os.path.join(d, 'fp8.json'), setp(setp(self.MLP, ('fp8',), {'amax_history_len': 16, 'amax_compute': 'max', 'margin': 'x'}), ('precisions',), ['amp_fp8']))
            self.wjson(os.path.join(d, 'tridx.json'), setp(self.TR, ('data',), {'type': 'idx', 'train_images': 'a', 'train_labels': 'b', 'eval_images': 'c', 'eval_labels': 'e', 'train_samples': 8, 'eval_samples': 8}))
            idx = setp(self.MLP, ('data',), {'type': 'idx', 'train_images': 'tri', 'train_labels': 'trl', 'eval_images': 'evi', 'eval_labels': 'evl', 'train_samples': 256, 'eval_samples': 64})
            self.wjson(os.path.join(d, 'idxlabels.json'), idx)
            self.wbytes(os.path.join(d, 'tri'), idx_images(256, 8, 8))
            self.wbytes(os.path.join(d, 'trl'), idx_labels(256, labels=bytes([0] * 200 + [200] * 56)))
            self.wbytes(os.path.join(d, 'evi'), idx_images(64, 8, 8))
            self.wbytes(os.path.join(d, 'evl'), idx_labels(64))
            self.wbytes(os.path.join(d, 'trl_ok'), idx_labels(256))
            self.wjson(os.path.join(d, 'nofile.json'), setp(setp(idx, ('data', 'eval_images'), 'missing'), ('data', 'train_labels'), 'trl_ok'))
            self.wjson(os.path.join(d, 'stage.json'), setp(self.RN, ('model', 'stem'), 'bogus'))
            self.wjson(os.path.join(d, 'small.json'), setp(setp(self.MLP, ('name',), 'small'), ('data', 'train_samples'), 2048))
            self.wjson(os.path.join(d, 'beta.json'), setp(setp(self.MLP, ('name',), 'beta'), ('train', 'optimizer', 'beta2'), 0.99999999))
            self.wbytes(os.path.join(d, 'trail.json'), json.dumps(setp(self.MLP, ('name',), 'trail')) + '\0{}')
            self.wjson(os.path.join(d, 'tdup.json'), setp(self.TR, ('fp32_layers',), ['head', 'head']))
        sl = '{s}/slow.json'
        q = ['--device', 'cpu']
        for label, args, names in [
            ('good then a spec error', ['run', sl, 'bad.json'] + q, ('bad.json', 'model.hidden[1]')),
            ('good then bad idx labels', ['run', sl, 'idxlabels.json'] + q, ('trl',)),
            ('good then a missing idx file', ['run', sl, 'nofile.json'] + q, ('missing',)),
            ('good then the same name in another file', ['run', sl, 'dup.json'] + q, ('slow.json', 'dup.json')),
            ('the same spec twice', ['run', sl, sl] + q, ('slow.json',)),
            ('the same spec twice via ./ spelling', ['run', sl, '{s}/./slow.json'] + q, ('slow.json',)),
            ('good then unknown fp32_layers name', ['run', sl, 'layers.json'] + q, ('nonexistent',)),
            ('good then heads not dividing d_model', ['run', sl, 'heads.json'] + q, ('heads.json',)),
            ('good then bad fp8 margin', ['run', sl, 'fp8.json'] + q, ('fp8.json',)),
            ('good then idx for a transformer', ['run', sl, 'tridx.json'] + q, ('tridx.json',)),
            ('good then bad resnet stem', ['run', sl, 'stage.json'] + q, ('stage.json',)),
            ('good then beta2 1 as a float', ['run', sl, 'beta.json'] + q, ('beta.json',)),
            ('good then trailing bytes', ['run', sl, 'trail.json'] + q, ('trail.json',)),
            ('good then duplicate fp32_layers', ['run', sl, 'tdup.json'] + q, ('tdup.json',)),
            ('--batch-size too big for the second spec only', ['run', sl, 'small.json', '--batch-size', '4096'] + q, ('small.json',)),
            ('--batch-sizes too big for the second spec only', ['run', sl, 'small.json', '--batch-sizes', '32,4096'] + q, ('small.json',)),
            ('--seeds 2 then a bad spec', ['run', sl, 'bad.json', '--seeds', '2'] + q, ('bad.json',)),
            ('good then a bad output path', ['run', sl, '--json', '/proc/x.json'] + q, ('/proc/x.json',)),
            ('good then an output that is a directory', ['run', sl, '--json', '{d}'] + q, ()),
            ('--json of a run that could pass 256 MiB', ['run', sl, '--repeat', '1000', '--seeds', '1000', '--epochs', '10000', '--json', 'o.json'] + q, ('o.json',)),
            ('--json with a huge but valid sweep', ['run', sl, '--repeat', '1000', '--epochs', '10000', '--batch-sizes', '1,2,3,4,5,6,7,8', '--json', 'o.json'] + q, ()),
            ('maxbatch good then bad', ['maxbatch', sl, 'bad.json', '--memory-limit', '1MiB'] + q, ('bad.json',)),
            ('maxbatch good then bad idx', ['maxbatch', sl, 'idxlabels.json', '--memory-limit', '1MiB'] + q, ('trl',)),
            ('validate good then bad', ['validate', sl, 'bad.json'], ('bad.json',)),
            ('validate good then bad idx labels', ['validate', sl, 'idxlabels.json'], ('trl',)),
            ('run without --quiet and --device: bad spec after good (one line only)', ['run', sl, 'bad.json'], ('bad.json',)),
            ('run --device auto: bad second spec', ['run', sl, 'bad.json', '--device', 'auto'], ('bad.json',)),
            ('good then bad --precisions for the second (amp_fp8 heads)', ['run', sl, 'heads.json', '--precisions', 'amp_fp8'] + q, ()),
        ]:
            self.case(cls, label, args, expect='bad', names=names, setup=bad_specs, timeout=90)
        self.case(cls, 'profile a bad spec (no training first)', ['profile', 'bad.json'] + q, expect='bad', setup=bad_specs)
        self.case(cls, 'explain a bad idx spec', ['explain', 'idxlabels.json'] + q, expect='bad', setup=bad_specs)
        self.case(cls, 'explain a good spec with --json /proc/x', ['explain', sl, '--json', '/proc/x.json'] + q, expect='bad', setup=bad_specs)
        self.case(cls, 'profile a good spec with --json in a missing dir', ['profile', sl, '--json', 'no/x.json'] + q, expect='bad', setup=bad_specs)

    # ------------------------------------------------------------------ main
    def run_all(self):
        t0 = time.monotonic()
        try:
            self.fixtures()
            for cls, fn in [('spec', self.c_spec_syntax), ('spec', self.c_spec_values), ('cli', self.c_cli),
                            ('outpath', self.c_outpath), ('results', self.c_results), ('idx', self.c_idx),
                            ('late', self.c_late), ('roundtrip', self.c_roundtrip)]:
                if self.only is None or cls in self.only or (cls == 'spec' and 'agree' in self.only):
                    t = time.monotonic()
                    fn()
                    print(f'[probe] {fn.__name__}: done at {self.n} cases, {time.monotonic() - t:.0f} s', file=sys.stderr, flush=True)
        finally:
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)
        return time.monotonic() - t0

    def summary(self, wall):
        print()
        print('=' * 100)
        print(f'mpbench probe: {self.n} cases run, {self.held} held, {len(self.defects)} defect(s), '
              f'{len(self.observations)} observation(s), {wall:.0f} s')
        print('per class (run / held): ' + ', '.join(f'{k} {v[0]}/{v[1]}' for k, v in sorted(self.per_class.items())))
        for s in self.skipped:
            print('skipped:', s)
        for title, items in (('DEFECTS', self.defects), ('OBSERVATIONS (soft expectations; the README states no explicit rule)', self.observations)):
            print()
            print(f'--- {title}: {len(items)}')
            for i, d in enumerate(items, 1):
                print(f'[{i}] ({d["cls"]}) {d["name"]}')
                print(f'    command : {d["cmd"]}')
                print(f'    expected: {d["expected"]}; got exit {d["rc"]} in {d["elapsed"]} s')
                for p in d['problems']:
                    print(f'    problem : {p}')
                print(f'    stderr  : {d["stderr"]!r}')
        if self.keep:
            print(f'\nkept: {self.root}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--mpbench', required=True)
    ap.add_argument('--quick', action='store_true', help='fewer and cheaper cases')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory (paths in the report)')
    ap.add_argument('--only', help='comma-separated classes: spec,cli,outpath,results,idx,late,roundtrip')
    ap.add_argument('--json', help='also write the defects and observations here')
    a = ap.parse_args()
    if not os.access(a.mpbench, os.X_OK):
        sys.exit(f'probe: {a.mpbench} is not an executable')
    p = Probe(a.mpbench, a.quick, a.keep, a.only)
    wall = p.run_all()
    p.summary(wall)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'cases': p.n, 'held': p.held, 'defects': p.defects, 'observations': p.observations}, f, indent=1)
    sys.exit(1 if p.defects else 0)


if __name__ == '__main__':
    main()
