# SPDX-License-Identifier: Apache-2.0
# The bench_trace smoke test (see CMakeLists.txt): runs a tiny trace through two presets and
# checks the JSON's shape, then that traces are deterministic and read back unchanged, then
# replays the trace on llmsvcd.
#   cmake -DBENCH_TRACE=... -DWORK_DIR=... -P bench_trace_smoke.cmake
set(calls 8)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${BENCH_TRACE} --contexts 3 --calls ${calls} --choice markov --seed 7 --time-scale 0
          --budget-fraction 0.5 --presets llmsvc,lmk --state-dir ${WORK_DIR}/state
          --save-trace ${WORK_DIR}/trace.json --out ${WORK_DIR}/result.json
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_trace exited with ${rc}")
endif()
file(READ ${WORK_DIR}/result.json result)
string(JSON n_runs ERROR_VARIABLE err LENGTH "${result}" runs)
if(err OR NOT n_runs EQUAL 2)
  message(FATAL_ERROR "expected 2 runs in result.json: ${err}")
endif()
math(EXPR last "${n_runs} - 1")
foreach(r RANGE ${last})
  string(JSON n ERROR_VARIABLE err LENGTH "${result}" runs ${r} calls)
  if(err OR NOT n EQUAL calls)
    message(FATAL_ERROR "run ${r}: expected ${calls} call records, got '${n}' ${err}")
  endif()
  string(JSON mean ERROR_VARIABLE err GET "${result}" runs ${r} switch_in_ms all mean)
  if(err)
    message(FATAL_ERROR "run ${r}: no switch_in_ms.all.mean: ${err}")
  endif()
endforeach()
file(READ ${WORK_DIR}/trace.json trace)
string(JSON n ERROR_VARIABLE err LENGTH "${trace}" calls)
if(err OR NOT n EQUAL calls)
  message(FATAL_ERROR "trace.json: expected ${calls} calls, got '${n}' ${err}")
endif()
# The same seed gives the same trace, and a trace read back is written out unchanged.
execute_process(COMMAND ${BENCH_TRACE} --contexts 3 --calls ${calls} --choice markov --seed 7 --presets none
                        --save-trace ${WORK_DIR}/again.json --out ${WORK_DIR}/none.json RESULT_VARIABLE rc1)
execute_process(COMMAND ${BENCH_TRACE} --trace ${WORK_DIR}/trace.json --presets none
                        --save-trace ${WORK_DIR}/reread.json --out ${WORK_DIR}/none.json RESULT_VARIABLE rc2)
file(READ ${WORK_DIR}/again.json again)
file(READ ${WORK_DIR}/reread.json reread)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT again STREQUAL trace OR NOT reread STREQUAL trace)
  message(FATAL_ERROR "trace generation is not deterministic, or its JSON does not read back the same")
endif()
# The same trace on a real llmsvcd through llmsvc.h: one run, a record per call, no failure
# (exit 3 otherwise).
execute_process(COMMAND ${BENCH_TRACE} --trace ${WORK_DIR}/trace.json --time-scale 0 --budget-fraction 0.5
                        --presets llmsvc --via llmsvcd --state-dir ${WORK_DIR}/state --out ${WORK_DIR}/daemon.json
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_trace --via llmsvcd exited with ${rc}")
endif()
file(READ ${WORK_DIR}/daemon.json daemon)
string(JSON engine ERROR_VARIABLE err GET "${daemon}" runs 0 engine)
string(JSON n ERROR_VARIABLE err2 LENGTH "${daemon}" runs 0 calls)
if(err OR err2 OR NOT engine STREQUAL "llmsvcd" OR NOT n EQUAL calls)
  message(FATAL_ERROR "daemon.json: expected one llmsvcd run of ${calls} calls: ${err} ${err2}")
endif()
# Greedy, same trace, same policy: every call leaves its context as long as the engine's did.
math(EXPR last_call "${calls} - 1")
foreach(i RANGE ${last_call})
  string(JSON t_daemon GET "${daemon}" runs 0 calls ${i} context_tokens)
  string(JSON t_engine GET "${result}" runs 0 calls ${i} context_tokens)
  if(NOT t_daemon EQUAL t_engine)
    message(FATAL_ERROR "call ${i}: ${t_daemon} context tokens through llmsvcd, ${t_engine} in the engine")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
