# tests/unit/ops/: the checks beside the test_ops binary (included by tests/CMakeLists.txt).
#
# ops_only_lint: layers, ZeRO hooks, the trainer, the optimizer objects and the examples call ops::
# only, never a backend's kernels (ops_only_lint.sh says what it refuses); the fixture entries show
# it passes allowed code and finds each kind of violation.
set(_ops_dir ${CMAKE_CURRENT_SOURCE_DIR}/unit/ops)
add_test(NAME ops_only_lint COMMAND bash ${_ops_dir}/ops_only_lint.sh ${PROJECT_SOURCE_DIR}
  framework/nn framework/train framework/optim/optimizers parallel examples)
add_test(NAME ops_only_lint_allows_the_thread_count
  COMMAND bash ${_ops_dir}/ops_only_lint.sh ${_ops_dir}/lint_fixtures good)
add_test(NAME ops_only_lint_finds_every_kind
  COMMAND bash ${_ops_dir}/ops_only_lint.sh ${_ops_dir}/lint_fixtures bad)
set_tests_properties(ops_only_lint_finds_every_kind PROPERTIES
  PASS_REGULAR_EXPRESSION "(^|\n)10 violations: ")
set_tests_properties(ops_only_lint ops_only_lint_allows_the_thread_count
  ops_only_lint_finds_every_kind PROPERTIES LABELS "unit;lint" TIMEOUT 60)

# ops_check_complete_lists_every_entry: dispatch.cpp compiled against an OpTable with one entry
# more than check_complete lists must stop at its static_assert (the probe target is built only by
# this test, never by `all`).
set(_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/ops_static_assert_probe)
set(_probe_header ${_probe_dir}/framework/backend/ops/op_table.hpp)
add_custom_command(OUTPUT ${_probe_header}
  COMMAND ${CMAKE_COMMAND} -DIN=${PROJECT_SOURCE_DIR}/framework/backend/ops/op_table.hpp
          -DOUT=${_probe_header} -P ${_ops_dir}/add_op_table_entry.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/framework/backend/ops/op_table.hpp ${_ops_dir}/add_op_table_entry.cmake
  COMMENT "OpTable with an entry check_complete does not list")
add_library(ops_static_assert_probe OBJECT EXCLUDE_FROM_ALL
  ${PROJECT_SOURCE_DIR}/framework/backend/ops/dispatch.cpp ${_probe_header})
target_include_directories(ops_static_assert_probe BEFORE PRIVATE ${_probe_dir})
target_link_libraries(ops_static_assert_probe PRIVATE strata_flags strata_core strata_optim)
add_test(NAME ops_check_complete_lists_every_entry
  COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ops_static_assert_probe)
set_tests_properties(ops_check_complete_lists_every_entry PROPERTIES
  PASS_REGULAR_EXPRESSION "check_complete must list every OpTable entry" LABELS "unit;lint"
  TIMEOUT 300)
