# Runs one libFuzzer target for CTest (tests/CMakeLists.txt, add_fuzz_target):
#   cmake -DFUZZER=exe -DSEEDS=glob -DMAX_LEN=bytes -DSECONDS=s -DDICT=file -DWORK=dir
#         [-DMPBENCH=exe -DPROFILE_SPEC=spec] -P this
# With PROFILE_SPEC, a profile and an explain file of it join the seeds.
# Seeds are copied into WORK/corpus under names made from their paths (two seeds may share a
# file name); what the fuzzer adds stays there for the next run. Crashes land in WORK.
set(corpus ${WORK}/corpus)
file(MAKE_DIRECTORY ${corpus})
file(GLOB_RECURSE seeds ${SEEDS})
get_filename_component(seed_root ${SEEDS} DIRECTORY)
set(copied 0)
foreach(seed ${seeds})
  file(SIZE ${seed} size)
  if(size GREATER MAX_LEN)
    continue()  # libFuzzer would truncate it to MAX_LEN: no longer valid JSON
  endif()
  file(RELATIVE_PATH rel ${seed_root} ${seed})
  string(REPLACE "/" "_" rel ${rel})
  file(COPY_FILE ${seed} ${corpus}/seed_${rel} ONLY_IF_DIFFERENT)
  math(EXPR copied "${copied} + 1")
endforeach()
list(LENGTH seeds found)
message(STATUS "${copied} of ${found} seeds (${SEEDS}) within ${MAX_LEN} bytes")
if(PROFILE_SPEC)
  execute_process(COMMAND ${MPBENCH} profile ${PROFILE_SPEC} --device reference --steps 2 --quiet
                          --json ${corpus}/seed_profile.json
                  OUTPUT_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpbench profile ${PROFILE_SPEC} failed (${rc})")
  endif()
  # An explain file too: report draws both kinds.
  execute_process(COMMAND ${MPBENCH} explain ${PROFILE_SPEC} --device reference --steps 2 --quiet
                          --precisions fp32,amp_bf16 --json ${corpus}/seed_explain.json
                  OUTPUT_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpbench explain ${PROFILE_SPEC} failed (${rc})")
  endif()
endif()

# Quiet (no line per new input), so that a failure's report is not lost in CTest's output.
set(args -max_total_time=${SECONDS} -max_len=${MAX_LEN} -timeout=30 -rss_limit_mb=3072
         -verbosity=0 -print_funcs=0 -print_final_stats=1 -artifact_prefix=${WORK}/)
if(EXISTS ${DICT})
  list(APPEND args -dict=${DICT})
endif()
execute_process(COMMAND ${FUZZER} ${args} ${corpus} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); the input that failed is in ${WORK}/")
endif()
