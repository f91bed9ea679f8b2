# Script mode (cmake -P), run after each build of a Catch2 v2 test binary:
# lists its test cases and writes one add_test per case to OUTPUT.
#   TEST_TARGET TEST_EXECUTABLE TEST_EMULATOR (a list, may be empty)
#   TEST_TIMEOUT TEST_LOCK (extra properties, may be empty) TEST_WORKING_DIR OUTPUT
# Case names are handled as plain strings, never as CMake lists, so ';', '['
# and ']' in a name survive.
execute_process(
    COMMAND ${TEST_EMULATOR} "${TEST_EXECUTABLE}" --list-test-names-only
    OUTPUT_VARIABLE listing
    ERROR_VARIABLE errors
    RESULT_VARIABLE result
    WORKING_DIRECTORY "${TEST_WORKING_DIR}")
# Catch2 v2 exits with the number of cases listed.
if(NOT result MATCHES "^[0-9]+$")
    message(FATAL_ERROR "listing the test cases of ${TEST_EXECUTABLE} failed (${result}):\n${listing}\n${errors}")
endif()

# A bracket argument that no case name can close early.
function(tally_quote out value)
    set(eq "=")
    while(value MATCHES "]${eq}]")
        string(APPEND eq "=")
    endwhile()
    set(${out} "[${eq}[${value}]${eq}]" PARENT_SCOPE)
endfunction()

set(executor "")
foreach(arg IN LISTS TEST_EMULATOR)
    tally_quote(q "${arg}")
    string(APPEND executor " ${q}")
endforeach()
string(REPLACE ";" " " lock_properties "${TEST_LOCK}")
tally_quote(exe "${TEST_EXECUTABLE}")
tally_quote(workdir "${TEST_WORKING_DIR}")

set(script "")
set(count 0)
string(REPLACE "\r" "" listing "${listing}")
while(NOT listing STREQUAL "")
    string(FIND "${listing}" "\n" eol)
    if(eol EQUAL -1)
        set(name "${listing}")
        set(listing "")
    else()
        string(SUBSTRING "${listing}" 0 ${eol} name)
        math(EXPR next "${eol} + 1")
        string(SUBSTRING "${listing}" ${next} -1 listing)
    endif()
    if(name STREQUAL "")
        continue()
    endif()
    # Catch's test-spec syntax: backslash escapes, ',' separates, '[' starts a tag.
    set(spec "${name}")
    foreach(c "\\" "," "[" "]")
        string(REPLACE "${c}" "\\${c}" spec "${spec}")
    endforeach()
    tally_quote(test_name "${TEST_TARGET}:${name}")
    tally_quote(test_spec "${spec}")
    # --warn NoTests: a spec that matches nothing fails instead of passing.
    string(APPEND script "add_test(${test_name}${executor} ${exe} ${test_spec} --warn NoTests)\n")
    string(APPEND script "set_tests_properties(${test_name} PROPERTIES WORKING_DIRECTORY ${workdir} "
                         "TIMEOUT ${TEST_TIMEOUT} LABELS ${TEST_TARGET} ${lock_properties})\n")
    math(EXPR count "${count} + 1")
endwhile()
if(count EQUAL 0)
    # No TEST_CASE (a stand-in built when an optional dependency is missing):
    # one entry that runs the binary as it is.
    tally_quote(test_name "${TEST_TARGET}")
    string(APPEND script "add_test(${test_name}${executor} ${exe})\n")
    string(APPEND script "set_tests_properties(${test_name} PROPERTIES WORKING_DIRECTORY ${workdir} "
                         "TIMEOUT ${TEST_TIMEOUT} LABELS ${TEST_TARGET} ${lock_properties})\n")
endif()
file(WRITE "${OUTPUT}" "${script}")
