# Fails when docs/ops.md differs from what `prism ops --markdown` prints.
execute_process(COMMAND ${PRISM} ops --markdown OUTPUT_VARIABLE actual RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "prism ops --markdown failed (${rc})")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "docs/ops.md is out of date: regenerate it with `prism ops --markdown > docs/ops.md`")
endif()
