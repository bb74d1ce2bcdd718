"""Driving and parsing Google's TFLite ``benchmark_model`` binary (stock Android phones).

Two halves, both pure (no device access here; ``targets/adb/`` runs what this builds):

* **Parsing.** ``parse_log(text)`` turns captured benchmark_model output of any version
  (TFLite 1.12 to today's LiteRT nightlies; with or without ``INFO:``/logcat prefixes;
  scientific notation; ``p5/median/p95``; memory, delegate and echoed-parameter lines;
  operator-wise profiling tables) into a ``BenchmarkModelLog``. Unknown lines are kept in
  ``unparsed``; nothing in a log makes it raise. ``to_result_rows(log)`` makes edgebench
  result rows from it. The tool prints only summary statistics, so an imported row never
  has a p99: ``p99`` is None and ``p99_valid`` False ("benchmark_model prints no
  per-inference samples"); p50/p5/p95 appear only when the log printed them.
* **Driving.** ``build_argv(...)`` makes the argv of one invocation (the caller quotes it
  for the device shell). Per-inference samples -- the only source of an honest P99 -- come
  from ``build_sample_loop_script(argv, control=...)``: one POSIX ``sh`` loop run on the device
  that invokes the binary once per sample with ``--num_runs=1`` after the job's warm-up, under
  the job's stop rule; ``parse_sample_loop(text)`` reads the ``curr=`` of each invocation's
  single timed run. These are per-process samples, not steady-state ones (see ``sample_loop``). ``write_input_value_files`` and
  ``split_output_file`` move InputSet samples in (``--input_layer_value_files``) and
  outputs out (``--output_filepath``, raw bytes of all outputs concatenated).

benchmark_model writes its log to **stderr** (TFLITE_LOG); capture ``2>&1``.

Modules, one idea each: ``log`` (the parsed structures), ``parse`` (text -> log), ``log_rows``
(log -> result rows, ``import-log``), ``binary`` (finding/checking the binary, failure
messages), ``argv`` (argv builder, input value files, output file), ``sample_loop`` (the
device-side per-inference sample loop). The names below are re-exported for users and tests;
code inside edgebench imports from the submodule.
"""

from edgebench.targets.benchmark_model.argv import (
    InputValueFiles,
    build_argv,
    describe_argv,
    split_output_file,
    write_input_value_files,
)
from edgebench.targets.benchmark_model.binary import (
    ENV_VAR,
    MEASUREMENT_DOCS_URL,
    NIGHTLY_ANDROID_AARCH64_URL,
    BinaryInfo,
    check_abi,
    classify_failure,
    resolve_binary,
)
from edgebench.targets.benchmark_model.log import BenchmarkModelLog, OpProfileRow, RunStats
from edgebench.targets.benchmark_model.log_rows import (
    P99_NOTE,
    import_log_file,
    latency_from_log,
    primary_delegate,
    to_result_rows,
)
from edgebench.targets.benchmark_model.parse import parse_log, parse_stats
from edgebench.targets.benchmark_model.sample_loop import (
    SampleLoop,
    build_sample_loop_script,
    parse_sample_loop,
    read_sample_loop,
    sample_argv,
    sample_method,
)

__all__ = [
    "ENV_VAR", "MEASUREMENT_DOCS_URL", "NIGHTLY_ANDROID_AARCH64_URL", "P99_NOTE",
    "BenchmarkModelLog", "BinaryInfo", "InputValueFiles", "OpProfileRow", "RunStats", "SampleLoop",
    "build_argv", "build_sample_loop_script", "check_abi", "classify_failure", "describe_argv",
    "import_log_file", "latency_from_log", "parse_log", "parse_sample_loop", "parse_stats", "read_sample_loop",
    "primary_delegate", "resolve_binary", "sample_argv", "sample_method", "split_output_file",
    "to_result_rows", "write_input_value_files",
]
