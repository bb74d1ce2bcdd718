"""Typed result rows: what every producer builds and every reader reads.

One result type from producer to store (STYLE.md 15): ``bench``, ``convert-and-compare``,
``compare``, ``matrix``, ``import-log`` build :class:`InferenceRow`; training baselines build
:class:`TrainRow`; both travel in a :class:`Document`. Dicts exist only at the JSON/store
boundary (``to_dict`` / ``from_dict``); readers use attributes, so a misspelt field fails loudly
instead of rendering as "-".

JSON contract (docs/json.md, docs/architecture.md "Contracts"): the keys below are what users script
against. Schema history, and how old documents are read:

* **1** (edgebench 0.1.0): ``warmup_ms`` was a dict in bench rows, a list of milliseconds in
  compare rows and a scalar mean in import-log rows.
* **2**: ``warmup_ms`` is always the summary object ``{runs, mean, min, max, total, first}``
  (``runs`` None when only a mean is known) with the raw ``warmup_samples_ns`` beside it.
  ``from_dict`` reads version 1 rows into the same typed form.

Issue 15 added, without a schema bump (rows written before simply lack them and load with
``None``/empty): ``delegation`` (:class:`Delegation`), ``op_profile`` (:class:`OpEntry` list; an
import-log row of schema 2 kept benchmark_model's "Run Order" rows there, which still load),
``op_profile_info``, ``verdicts`` (:class:`Verdict` list), ``runtime_api``, ``accelerator``,
``fully_accelerated``, ``gpu_precision``.

Fields that a reader does not know (written by a newer edgebench, or by a producer this module
does not type) are kept in ``unknown`` and written back unchanged, so a round trip never drops
data.
"""

from edgebench.rows._json import STATUSES  # noqa: F401
from edgebench.rows.diagnosis import (  # noqa: F401
    Bisect,
    Candidate,
    Diagnosis,
    Intermediates,
    KeepFloatSearch,
    Layer,
    Probe,
    Unmatched,
)
from edgebench.rows.document import Document  # noqa: F401
from edgebench.rows.llm import Agreement, LlmPart, Spread, TaskScore  # noqa: F401
from edgebench.rows.readiness import COMPILE_STATUSES, LeftOnCpu, Readiness  # noqa: F401
from edgebench.rows.parts import Accuracy, Cost, Drift, Latency, SizeExplained, Warmup, Worst, drifts_from_dict  # noqa: F401
from edgebench.rows.regimes import (COLD_START_PHASES, ColdStart, ConcurrencyLevel, Delegation, Energy,  # noqa: F401
                                     EnergyUnits, OpEntry, Paced, Sustained, Verdict, Window, concurrency_levels)
from edgebench.rows.row import ENERGY_NOT_ASKED, InferenceRow, Row, TrainRow, row_from_dict, sample_class_of, typed_row  # noqa: F401
