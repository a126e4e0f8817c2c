# Included by tests/CMakeLists.txt.
#
# test_parallel: the pure parts (rank layouts, parameter counts, config checks), no MPI;
# its sources are tests/parallel/*.cpp.
ternion_test(parallel ternion_parallel ternion_layers)

# Multi-rank checks, each a real mpirun on this machine (ranks oversubscribe the cores; one
# OpenMP thread each). Labelled `mpi` as well, so `ctest -LE mpi` leaves them out.
find_package(MPI COMPONENTS CXX)  # the top level found it already; this provides MPIEXEC_EXECUTABLE
if(NOT MPIEXEC_EXECUTABLE)
  message(STATUS "tests: no mpirun found, the multi-rank tests are not declared")
  return()
endif()
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE parallel_mpirun_version
                ERROR_QUIET)
set(parallel_mpirun ${MPIEXEC_EXECUTABLE})
if(parallel_mpirun_version MATCHES "Open MPI|OpenRTE")
  list(APPEND parallel_mpirun --oversubscribe)  # MPICH oversubscribes without being asked
endif()
set(parallel_mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1")
set(parallel_configs ${CMAKE_CURRENT_SOURCE_DIR}/parallel/configs)
set(parallel_expect ${CMAKE_CURRENT_SOURCE_DIR}/parallel/expect_run.sh)
set(parallel_train_bin ${CMAKE_CURRENT_BINARY_DIR}/cli/good/train.bin)  # made by cli.fixtures

# ProcessGroups over MPI: a gtest program with its own main (it initialises MPI).
file(GLOB parallel_mpi_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/parallel_mpi/*.cpp)
add_executable(test_parallel_mpi ${parallel_mpi_sources} ${CMAKE_CURRENT_SOURCE_DIR}/mpi_gtest_main.cpp)
target_link_libraries(test_parallel_mpi PRIVATE ternion_parallel GTest::gtest)
target_include_directories(test_parallel_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME parallel_mpi.process_groups_np8
         COMMAND ${parallel_mpirun} -np 8 $<TARGET_FILE:test_parallel_mpi>)
set_tests_properties(parallel_mpi.process_groups_np8 PROPERTIES
                     LABELS "parallel;mpi" TIMEOUT 60 ENVIRONMENT "${parallel_mpi_env}")

# name, ranks, expected status, expect_run.sh checks, `--`, then ternion-train's arguments
function(parallel_mpi_cli_test name ranks status)
  list(FIND ARGN "--" split)
  list(SUBLIST ARGN 0 ${split} checks)
  math(EXPR first_arg "${split} + 1")
  list(SUBLIST ARGN ${first_arg} -1 train_args)
  add_test(NAME parallel_mpi.${name}
           COMMAND ${parallel_expect} ${status} ${checks}
                   -- ${parallel_mpirun} -np ${ranks} $<TARGET_FILE:ternion-train> ${train_args})
  set_tests_properties(parallel_mpi.${name} PROPERTIES
                       FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                       ENVIRONMENT "${parallel_mpi_env}")
endfunction()
set(data_set --set data.train=${parallel_train_bin})

# The 2 x 2 x 2 layout on 8 ranks: the eight layout lines, in order, printed once.
parallel_mpi_cli_test(dry_run_tp2_pp2_dp2 8 0
  --lines ${parallel_configs}/layout_tp2_pp2_dp2.expected
  --once "dry run: config, data and layout are valid on 8 ranks"
  --match "^  rank 7 tp=1 pp=1: .*blocks 2-3, ln_f, LM head"
  -- --config ${parallel_configs}/tp2_pp2_dp2.yaml ${data_set} --dry-run)
# The same config on 6 ranks: every rank refuses it, the message comes once, nobody hangs.
parallel_mpi_cli_test(dry_run_wrong_world_size 6 1
  --once "tp2_pp2_dp2.yaml:[0-9]+: parallel.pipeline: world size 6 is not parallel.tensor \\(2\\) x parallel.pipeline \\(2\\) x parallel.data \\(2\\) = 8$"
  -- --config ${parallel_configs}/tp2_pp2_dp2.yaml ${data_set} --dry-run)
# Tensor 2 x data 2 on 4 ranks.
parallel_mpi_cli_test(dry_run_tp2_dp2 4 0
  --lines ${parallel_configs}/layout_tp2_dp2.expected
  --once "dry run: config, data and layout are valid on 4 ranks"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --dry-run)
# Heads that do not split over the tensor-parallel ranks.
parallel_mpi_cli_test(dry_run_heads_not_divisible_by_tp 4 1
  --once "--set model.n_head=3: model.n_head: n_head \\(3\\) is not a multiple of parallel.tensor \\(2\\)"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set model.d_model=48
  --set model.n_head=3 --dry-run)
# Data every rank must read but cannot: refused alike by all, once.
parallel_mpi_cli_test(dry_run_missing_data 4 1
  --once "missing.bin': cannot open"
  -- --config ${parallel_configs}/tp2_dp2.yaml
  --set data.train=${CMAKE_CURRENT_BINARY_DIR}/cli/missing.bin --dry-run)
# A checkpoint directory no rank can make: refused by all at setup, once, in a dry run as in
# training.
parallel_mpi_cli_test(dry_run_save_dir_not_writable 4 1
  --once "checkpoint.save_dir: cannot create directory '.*/good.yaml/ckpt': Not a directory"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set}
  --set checkpoint.save_dir=${CMAKE_CURRENT_BINARY_DIR}/cli/good.yaml/ckpt --dry-run)
parallel_mpi_cli_test(training_refuses_unwritable_save_dir 2 1
  --once "checkpoint.save_dir: cannot create directory '.*/good.yaml/ckpt': Not a directory"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set checkpoint.save_dir=${CMAKE_CURRENT_BINARY_DIR}/cli/good.yaml/ckpt)
# Validation data that is also training data: refused by every rank's dry run, once.
parallel_mpi_cli_test(dry_run_val_is_a_training_file 2 1
  --once "data.val '.*/train.bin': '.*/train.bin' is also a file of data.train"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set data.val=${parallel_train_bin} --dry-run)
# The trace written over the metrics file, named another way (relative and absolute), or over
# its temporary FILE.partial: refused at setup, once.
set(pp2_dry_run --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
    --set parallel.data=1 --set parallel.pipeline=2 --dry-run)
parallel_mpi_cli_test(dry_run_trace_file_is_the_metrics_file 2 1
  --once "logging.trace_file: '.*/cli/run.jsonl' and logging.metrics_file 'cli/run.jsonl' name the same file"
  -- ${pp2_dry_run} --set logging.metrics_file=cli/run.jsonl
     --set logging.trace_file=${CMAKE_CURRENT_BINARY_DIR}/cli/run.jsonl)
parallel_mpi_cli_test(dry_run_trace_file_is_the_metrics_partial 2 1
  --once "logging.trace_file: '.*/cli/run.jsonl.partial' and logging.metrics_file '.*/cli/run.jsonl' name the same file .or one the other's temporary FILE.partial."
  -- ${pp2_dry_run} --set logging.metrics_file=${CMAKE_CURRENT_BINARY_DIR}/cli/run.jsonl
     --set logging.trace_file=${CMAKE_CURRENT_BINARY_DIR}/cli/run.jsonl.partial)
# A data-parallel option out of range: refused on every rank, once, naming the key.
parallel_mpi_cli_test(training_refuses_bad_zero_stage 2 1
  --once "--set parallel.zero_stage=3: parallel.zero_stage: must be 0, 1 or 2, got 3"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.zero_stage=3)
# Gradient reduction keys: a bad one refused once; hierarchical where the data group is on one
# node falls back to flat and says why; bf16 on the wire trains and says so.
parallel_mpi_cli_test(training_refuses_bad_grad_reduce 2 1
  --once "--set parallel.grad_reduce=tree: parallel.grad_reduce: must be flat, hierarchical or auto, got 'tree'"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_reduce=tree)
parallel_mpi_cli_test(training_refuses_bad_grad_reduce_dtype 2 1
  --once "--set parallel.grad_reduce_dtype=fp16: parallel.grad_reduce_dtype: must be fp32 or bf16, got 'fp16'"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_reduce_dtype=fp16)
parallel_mpi_cli_test(hierarchical_on_one_node_reduces_flat_bf16 2 0
  --once "^ternion: parallel.grad_reduce: hierarchical needs .* but its 2 ranks are on one node. reducing flat$"
  --once "^ternion: data-parallel gradients: flat over dp\\[0,1\\], bf16 on the wire$"
  --once "^step +2/2 "
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_reduce=hierarchical --set parallel.grad_reduce_dtype=bf16)
# Data-parallel and sequence-parallel settings that one data or tensor rank leaves nothing to do
# are named as such in the run's summary.
parallel_mpi_cli_test(settings_without_effect_are_named 2 0
  --once "layout tensor 1 x pipeline 2 x data 1, sequence parallel \\(no effect: tensor 1\\), 1f1b, ZeRO-2 \\(no effect: data 1\\),"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.pipeline=2 --set parallel.data=1 --set parallel.zero_stage=2
     --set parallel.sequence_parallel=true --set training.steps=1)
parallel_mpi_cli_test(training_refuses_powersgd_with_zero 2 1
  --once "--set parallel.grad_compression=powersgd: parallel.grad_compression: powersgd needs parallel.zero_stage 0"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_compression=powersgd --set parallel.zero_stage=1)
parallel_mpi_cli_test(training_refuses_negative_powersgd_start_step 2 1
  --once "--set parallel.powersgd_start_step=-1: parallel.powersgd_start_step: must be 0 or more"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_compression=powersgd --set parallel.powersgd_start_step=-1)
parallel_mpi_cli_test(powersgd_trains 2 0
  --once "^ternion: data-parallel gradients: PowerSGD of rank 2 over dp\\[0,1\\]-powersgd, [0-9]+ of [0-9]+ elements on the wire"
  --once "^step +2/2 "
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.grad_compression=powersgd --set parallel.powersgd_rank=2)
# An MPMD job of two ranks on the tp2_dp2 config with one data rank: name, expected status,
# expect_run.sh checks, `--`, rank 0's extra arguments, `:`, rank 1's extra arguments.
function(parallel_mpmd_test name status)
  list(FIND ARGN "--" split)
  list(FIND ARGN ":" colon)
  list(SUBLIST ARGN 0 ${split} checks)
  math(EXPR first "${split} + 1")
  math(EXPR count "${colon} - ${first}")
  list(SUBLIST ARGN ${first} ${count} rank0_args)
  math(EXPR first "${colon} + 1")
  set(rank1_args "")
  list(LENGTH ARGN length)
  if(first LESS length)
    list(SUBLIST ARGN ${first} -1 rank1_args)
  endif()
  set(common --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1)
  add_test(NAME parallel_mpi.${name}
           COMMAND ${parallel_expect} ${status} ${checks}
                   -- ${parallel_mpirun} -np 1 $<TARGET_FILE:ternion-train> ${common} ${rank0_args}
                   : -np 1 $<TARGET_FILE:ternion-train> ${common} ${rank1_args})
  set_tests_properties(parallel_mpi.${name} PROPERTIES
                       FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                       ENVIRONMENT "${parallel_mpi_env}")
endfunction()
# Ranks that resolved different configs stop before any collective can hang.
parallel_mpmd_test(ranks_with_different_configs 1
  --once "\\[rank 1\\] ternion-train: error: this rank resolved a config other than rank 0.s"
  -- --dry-run
  : --set checkpoint.save_dir=${CMAKE_CURRENT_BINARY_DIR}/runs/mpmd --dry-run)
# Ranks started for different commands (--dry-run or --print-config on some) stop at once,
# before any of them prints a config or waits in a collective the others never join.
parallel_mpmd_test(ranks_with_different_commands 2
  --once "\\[rank 1\\] ternion-train: error: this rank was started for training .*, rank 0 for --dry-run: every rank must run the same command"
  --once "error: 1 of 2 ranks failed"
  -- --dry-run :)
parallel_mpmd_test(print_config_on_some_ranks 2
  --once "\\[rank 1\\] ternion-train: error: this rank was started for --dry-run, rank 0 for --print-config"
  --none "^model:"
  -- --print-config : --dry-run)
# A bad command line: status 2 on every rank, the usage hint once.
parallel_mpi_cli_test(bad_argument 2 2
  --once "unknown argument '--frobnicate'"
  -- --config ${parallel_configs}/tp2_dp2.yaml --frobnicate)

# The launcher: reads the layout from the config (and --set), starts 8 ranks itself.
add_test(NAME parallel_mpi.ternion_run_dry_run
         COMMAND ${parallel_expect} 0 --lines ${parallel_configs}/layout_tp2_pp2_dp2.expected
                 -- ${CMAKE_SOURCE_DIR}/launch/ternion-run ${parallel_configs}/tp2_dp2.yaml
                 ${data_set} --set parallel.pipeline=2 --set model.n_layer=2
                 --set training.global_batch_size=8 --set parallel.tensor=2 --dry-run)
set_tests_properties(parallel_mpi.ternion_run_dry_run PROPERTIES
                     FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                     ENVIRONMENT "TERNION_TRAIN=$<TARGET_FILE:ternion-train>;OMP_NUM_THREADS=1")
# The config once: the layout and the run read the same file.
add_test(NAME parallel_mpi.ternion_run_refuses_a_second_config
         COMMAND ${parallel_expect} 2 --once "ternion-run: error: the config is given twice \\('.*tp2_dp2.yaml', then --config"
                 -- ${CMAKE_SOURCE_DIR}/launch/ternion-run ${parallel_configs}/tp2_dp2.yaml
                 --config ${parallel_configs}/tp2_dp2.yaml --dry-run)
add_test(NAME parallel_mpi.ternion_run_takes_config_as_an_option
         COMMAND ${parallel_expect} 0 --lines ${parallel_configs}/layout_tp2_pp2_dp2.expected
                 -- ${CMAKE_SOURCE_DIR}/launch/ternion-run --config ${parallel_configs}/tp2_dp2.yaml
                 ${data_set} --set parallel.pipeline=2 --set model.n_layer=2
                 --set training.global_batch_size=8 --set parallel.tensor=2 --dry-run)
# OMP_NUM_THREADS=0 would reach every rank, which OpenMP reads as all the cores each.
add_test(NAME parallel_mpi.ternion_run_refuses_zero_threads
         COMMAND ${parallel_expect} 2 --once "ternion-run: error: OMP_NUM_THREADS must be a positive whole number of threads per rank, got '0'"
                 -- ${CMAKE_SOURCE_DIR}/launch/ternion-run ${parallel_configs}/tp2_dp2.yaml
                 ${data_set} --dry-run)
set_tests_properties(parallel_mpi.ternion_run_refuses_a_second_config
                     parallel_mpi.ternion_run_takes_config_as_an_option PROPERTIES
                     FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                     ENVIRONMENT "TERNION_TRAIN=$<TARGET_FILE:ternion-train>;OMP_NUM_THREADS=1")
set_tests_properties(parallel_mpi.ternion_run_refuses_zero_threads PROPERTIES
                     FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                     ENVIRONMENT "TERNION_TRAIN=$<TARGET_FILE:ternion-train>;OMP_NUM_THREADS=0")
# A registered custom block on data-parallel ranks: each rank's count is the built model's.
add_test(NAME parallel_mpi.dry_run_custom_block_dp2
         COMMAND ${parallel_expect} 0 --once "^  rank 1 tp=0 pp=0: 833.3K \\(833280\\)"
                 --once "dry run: config, data and layout are valid on 2 ranks"
                 -- ${parallel_mpirun} -np 2 $<TARGET_FILE:custom_block_train>
                 --config ${CMAKE_SOURCE_DIR}/examples/custom_block/config.yaml ${data_set}
                 --set parallel.data=2 --set training.global_batch_size=32 --dry-run)
set_tests_properties(parallel_mpi.dry_run_custom_block_dp2 PROPERTIES
                     FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 60
                     ENVIRONMENT "${parallel_mpi_env}")
# A stop signal to the launcher: the ranks save and stop, and it exits 0 (mpirun alone would
# exit 1 on SIGINT and end the ranks unsaved on SIGTERM).
add_test(NAME parallel_mpi.ternion_run_stops_cleanly_on_signals
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/ternion_run_signal.sh
                 ${CMAKE_SOURCE_DIR}/launch/ternion-run $<TARGET_FILE:ternion-train>
                 ${CMAKE_CURRENT_BINARY_DIR}/cli/good.yaml ${CMAKE_CURRENT_BINARY_DIR}/cli/good/train.bin
                 ${CMAKE_CURRENT_BINARY_DIR}/ternion_run_signal)
set_tests_properties(parallel_mpi.ternion_run_stops_cleanly_on_signals PROPERTIES
                     FIXTURES_REQUIRED cli LABELS "parallel;mpi;cli" TIMEOUT 120
                     ENVIRONMENT "OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
# What the launcher asks of mpirun (a stand-in that prints it) on 1 and 2 cores: world size,
# threads per rank, --oversubscribe, and the world sizes it refuses.
add_test(NAME parallel_mpi.ternion_run_arithmetic
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/ternion_run_arithmetic.sh
                 ${CMAKE_SOURCE_DIR}/launch/ternion-run $<TARGET_FILE:ternion-train>
                 ${parallel_configs}/tp2_dp2.yaml ${CMAKE_CURRENT_BINARY_DIR}/ternion_run_arithmetic)
set_tests_properties(parallel_mpi.ternion_run_arithmetic PROPERTIES LABELS "parallel;cli"
                     SKIP_RETURN_CODE 77 TIMEOUT 60)
add_test(NAME parallel_mpi.print_layout
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_exit.sh 0 "^tensor 2 pipeline 1 data 4$"
                 $<TARGET_FILE:ternion-train> --config ${parallel_configs}/tp2_dp2.yaml
                 --set parallel.data=4 --set training.global_batch_size=8 --print-layout)
set_tests_properties(parallel_mpi.print_layout PROPERTIES LABELS "parallel;cli"
                     ENVIRONMENT "OMP_NUM_THREADS=1")
# --print-layout checks the whole config for the world its layout makes, so that launchers
# never start a job of impossible size (ternion-run once asked mpirun for 4e11 ranks).
foreach(case "99999999999;parallel.tensor: tensor \\(99999999999\\) x pipeline \\(1\\) x data \\(2\\) is more than 2\\^24 ranks"
             "0;parallel.tensor: must be at least 1"
             "3;n_head \\(2\\) is not a multiple of parallel.tensor \\(3\\)")
  list(GET case 0 tensor)
  list(GET case 1 message)
  add_test(NAME parallel_mpi.print_layout_refuses_tensor_${tensor}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_exit.sh 1 "${message}"
                   $<TARGET_FILE:ternion-train> --config ${parallel_configs}/tp2_dp2.yaml
                   --set parallel.tensor=${tensor} --print-layout)
  set_tests_properties(parallel_mpi.print_layout_refuses_tensor_${tensor} PROPERTIES
                       LABELS "parallel;cli")
endforeach()

# Pipeline configurations the schedules cannot run are refused on every rank, once.
parallel_mpi_cli_test(pipeline_more_stages_than_blocks 4 1
  --once "parallel.pipeline: 4 pipeline stages need at least 4 blocks, but model.n_layer is 2"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.data=1 --set parallel.pipeline=4)
parallel_mpi_cli_test(pipeline_interleaving_needs_whole_rounds 2 1
  --once "interleaving needs the micro-batch count \\(3\\) to be a multiple of parallel.pipeline \\(2\\)"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.data=1 --set parallel.pipeline=2 --set parallel.virtual_stages=2
     --set model.n_layer=4 --set parallel.micro_batch_size=1 --set training.global_batch_size=3)
parallel_mpi_cli_test(pipeline_chunks_need_blocks 2 1
  --once "4 model chunks \\(parallel.pipeline x parallel.virtual_stages\\) need at least as many blocks"
  -- --config ${parallel_configs}/tp2_dp2.yaml ${data_set} --set parallel.tensor=1
     --set parallel.data=1 --set parallel.pipeline=2 --set parallel.virtual_stages=2)
