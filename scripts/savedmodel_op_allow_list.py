"""Write edgebench/sources/allowed_ops.py: the SavedModel ops that load without --trust-model.

    python scripts/savedmodel_op_allow_list.py        # rewrite the list from this TensorFlow's op registry
    python scripts/savedmodel_op_allow_list.py --diff # what a newer TensorFlow would add or drop

An allow-list, not a deny-list: an op TensorFlow adds later is refused until this script is rerun
and the change reviewed. The list is

* every op of TensorFlow's registry that is **pure** -- not stateful, no ``resource``/``variant``
  input or output (variables, iterators, datasets, queues), no function attribute (what a function
  calls is scanned on its own), and no name of a family that reads or writes outside the model
  (files, readers, datasets, snapshots, checkpoints, summaries, debug dumps, RPC, send/recv,
  collectives, TPU, Python callbacks, protobuf decoding, memory-mapped constants);
* plus the stateful ops a model's own computation needs: variables, hash tables, control flow,
  calls, assertions, random numbers (``STATEFUL_ALLOWED``). Ops that read files (``RestoreV2``,
  table initializers from text files, ``ReadFile``) are allowed only where the file is the model's
  own (``sources/trust.py`` checks their inputs).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "edgebench" / "sources" / "allowed_ops.py"

# Name families that touch the world outside the model, whatever their stateful flag says.
OUTSIDE = re.compile(r"(File|Reader|Dataset|Iterator|Snapshot|Save|Restore|Checkpoint|Summary|Debug|Print|"
                     r"PyFunc|Rpc|Remote|Send|Recv|Collective|Nccl|Tpu|TPU|Immutable|Proto|Matching|Record|"
                     r"Queue|Barrier|Stage|MapPeek|MapUnstage|OrderedMap|Unbatch|Batch[A-Z]?Function|Lmdb|LMDB|"
                     r"Sql|Ignite|Bigtable|Kafka|Kinesis|"
                     r"Optional|Shard|_Host|Xla|_Mkl|Mkl|_Fused|_Arg|_Retval|_Device|_If|_While|Enter$|Exit$|"
                     r"NextIteration|RefEnter|RefExit|RefSwitch|RefMerge|Fake(Param|Queue))")
# Stateful ops a model's own computation uses (its variables, tables, control flow, randomness).
STATEFUL_ALLOWED = frozenset({
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "VarIsInitializedOp", "DestroyResourceOp", "DisableCopyOnRead", "ResourceGather", "ResourceGatherNd", "ResourceScatterAdd",
    "ResourceScatterUpdate", "VariableShape", "VariableV2", "Variable", "Assign", "AssignAdd", "AssignSub",
    "IsVariableInitialized", "TemporaryVariable", "DestroyTemporaryVariable",
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2", "LookupTableFind",
    "LookupTableFindV2", "LookupTableInsert", "LookupTableInsertV2", "LookupTableSize", "LookupTableSizeV2",
    "LookupTableImport", "LookupTableImportV2", "LookupTableExport", "LookupTableExportV2",
    "LookupTableRemoveV2", "InitializeTable", "InitializeTableV2", "AnonymousHashTable",
    "AnonymousMutableHashTable", "AnonymousMutableDenseHashTable", "AnonymousMutableHashTableOfTensors",
    "StatefulPartitionedCall", "PartitionedCall", "If", "While", "Case", "For", "StatelessIf", "StatelessWhile",
    "StatelessCase", "Assert", "NoOp", "Placeholder", "PlaceholderV2", "PlaceholderWithDefault", "Const",
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle",
    "RandomGamma", "RandomPoisson", "RandomPoissonV2", "Multinomial", "ParameterizedTruncatedNormal",
    "RngSkip", "RngReadAndSkip", "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt",
    "StatefulStandardNormalV2", "StatefulTruncatedNormal", "NonDeterministicInts",
    "TensorListReserve", "TensorListFromTensor", "TensorListStack", "TensorListGetItem", "TensorListSetItem",
    "TensorListPushBack", "TensorListPopBack", "TensorListLength", "TensorListElementShape", "TensorListConcatV2",
    "TensorListSplit", "TensorListGather", "TensorListScatterIntoExistingList", "TensorListResize",
    "EmptyTensorList", "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayConcatV3",
    "TensorArraySplitV3", "Switch", "Merge", "LoopCond", "ControlTrigger", "Enter", "Exit", "NextIteration",
    "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop", "CudnnRNNBackpropV2", "CudnnRNNBackpropV3",
    "CudnnRNNParamsSize", "CudnnRNNParamsToCanonical", "CudnnRNNParamsToCanonicalV2", "CudnnRNNCanonicalToParams",
    "CudnnRNNCanonicalToParamsV2", "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2",
    "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel", "FakeQuantWithMinMaxArgs",
    # the model's own checkpoint (the loader's restore; sources/trust.py checks the path is the model's)
    "RestoreV2", "SaveV2", "MergeV2Checkpoints", "ShardedFilename", "StringJoin",
    # table initializers from the model's own assets (checked likewise)
    "InitializeTableFromTextFile", "InitializeTableFromTextFileV2", "ReadFile",
    # prints to the log (PrintV2 to a file:// stream is refused by sources/trust.py)
    "Print", "PrintV2",
})


def registry() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow  # noqa: F401 -- registers every op
    from tensorflow.core.framework import op_def_pb2, types_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    ops = op_def_pb2.OpList()
    ops.ParseFromString(c_api.TF_GetBuffer(c_api.TF_GetAllOpList()))
    bad_types = {types_pb2.DT_RESOURCE, types_pb2.DT_VARIANT}
    out = {}
    for op in ops.op:
        args = list(op.input_arg) + list(op.output_arg)
        pure = (not op.is_stateful and not any(a.type in bad_types or a.is_ref for a in args)
                and not any(a.type in ("func", "list(func)") for a in op.attr) and not OUTSIDE.search(op.name)
                and not op.name.startswith("_"))
        out[op.name] = pure
    return out


def allowed() -> list[str]:
    reg = registry()
    return sorted({n for n, pure in reg.items() if pure} | {n for n in STATEFUL_ALLOWED if n in reg})


def render(names: list[str]) -> str:
    import tensorflow as tf

    import textwrap

    body = "\n".join(textwrap.wrap(" ".join(f"{n!r}," for n in names), 110, initial_indent="    ",
                                   subsequent_indent="    ", break_on_hyphens=False)) + "\n"
    return (f'"""SavedModel ops that load without --trust-model: {len(names)} ops, from TensorFlow {tf.__version__}\'s\n'
            'op registry by scripts/savedmodel_op_allow_list.py (read it for the rule). Generated: rerun the script\n'
            'and review the diff, never edit by hand."""\n\nALLOWED_OPS = frozenset({\n' + body + "})\n")


def main(argv: list[str]) -> int:
    names = allowed()
    if "--diff" in argv:
        have = set(re.findall(r"'([^']+)',", OUT.read_text())) if OUT.exists() else set()
        print("added:", sorted(set(names) - have))
        print("dropped:", sorted(have - set(names)))
        return 0
    OUT.write_text(render(names), encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(names)} ops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
