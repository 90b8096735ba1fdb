# Run at every build (CMakeLists.txt, target mpbench_git_describe): writes OUT, a C++ source
# defining mpbench::build_git_describe() as `git describe` of SRC says now, so that the result
# files name the commit the binary was built from, not the one its build folder was configured
# at. The file is rewritten only when that changes, so an unchanged build recompiles nothing.
execute_process(COMMAND git describe --always --dirty --abbrev=12
                WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE describe
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT describe)
  set(describe "unknown")  # no git, or a copy of the tree without .git (a device machine)
endif()
set(text "// Written by cmake/git_describe.cmake at build time.\n#include \"app/commands.h\"\n\nconst char* mpbench::build_git_describe() { return \"${describe}\"; }\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
