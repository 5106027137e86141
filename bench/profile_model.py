r"""Where a training step's (or a batch-1 forward's) time goes: TensorFlow's profiler, per op, summed by role.

    python bench/profile_model.py                         # albert_tf, train step, batch 8, seq 128, graph
    python bench/profile_model.py --side=keras-hub --what=infer --batch_size=1 --top=30

Flags:
  --side         albert_tf or keras-hub (the same model as bench_model.py).
  --what         train (forward + backward + clipping + LAMB) or infer (encoder forward).
  --batch_size   examples per step (8); --seq_length (128), --num_predictions (20).
  --steps        profiled steps (2), after two warm-up steps.
  --top          also list the N most expensive ops by name (0).
  --policy       float32 or mixed_bfloat16 (as `--mixed_precision=bf16`).

Runs `tf.profiler.experimental` around --steps steps (tf.function, no XLA: XLA fuses everything into a few
kernels the host trace does not break down) and sums each traced TF op's duration per step, by role: the
matmuls (dense layers, attention products, the tied MLM logits), softmax, LayerNorm, GELU, bias adds,
transposes and reshapes, the optimizer update, the gradient clipping, embedding lookups and their gradients,
and the rest. Ops running on the two inter-op threads overlap, so the roles can sum to more than the
step's wall time; the wall time is printed beside them.
"""

import collections
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_model
import numpy as np
import tensorflow as tf
from absl import app, flags

from albert_tf.config import AlbertConfig

FLAGS = flags.FLAGS
flags.DEFINE_enum("side", "albert_tf", ["albert_tf", "keras-hub"], "Implementation.")
flags.DEFINE_enum("what", "train", ["train", "infer"], "Training step or encoder forward.")
flags.DEFINE_integer("batch_size", 8, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked-LM positions per example.")
flags.DEFINE_integer("steps", 2, "Profiled steps.")
flags.DEFINE_integer("top", 0, "Also list the N most expensive ops by name.")
flags.DEFINE_enum("policy", "float32", ["float32", "mixed_bfloat16"], "Keras dtype policy of the model.")

# (role, pattern on "name:type"), first match wins.
ROLES = [
    ("optimizer update (LAMB)", (r"(^|/)(lamb|adam|optimizer)[^/]*/|AssignSubVariableOp|AssignAddVariableOp|"
                                 r"AssignVariableOp")),
    ("gradient clipping", r"global_norm|clip"),
    ("matmul: MLM logits (tied table)", (r"(predictions|mlm_head)[^:]*:(_Mkl)?(BatchMatMulV2|MatMul|Einsum|"
                                         r"_MklNativeFusedMatMul)")),
    ("matmul: attention products", r"(attention|softmax)[^:]*(einsum|MatMul_[12]|matmul_[12])[^:]*:"),
    ("matmul: dense layers", (r":(_Mkl)?(BatchMatMulV2|MatMul|Einsum|_MklNativeFusedMatMul|_FusedMatMul|"
                              r"_MklFusedMatMul|_MklNativeMatMul|_MklFusedBatchMatMulV2)$")),
    ("softmax + mask", r"[Ss]oftmax|SelectV2|attention_bias"),
    ("LayerNorm", r"[Ll]ayer_?[Nn]orm|moments|Rsqrt|SquaredDifference|FusedBatchNorm"),
    ("GELU", r":(Tanh|TanhGrad|Pow|Square|Erf)$|[Gg]elu"),
    ("bias add (+grad)", r":(BiasAdd|BiasAddGrad)$"),
    ("transposes, reshapes", r":(_Mkl)?Transpose$|:Reshape$|:ConjugateTranspose$"),
    ("embedding lookup (+grad)", r"embedding|GatherV2|UnsortedSegmentSum|ResourceGather|take_along_axis"),
    ("loss", r"SparseSoftmaxCrossEntropy|cross_entropy"),
    ("elementwise: adds, muls (residuals, scales, dropout)", r":(AddV2|Mul|Sub|AddN|RealDiv|Neg|Sum|Mean|Cast)$"),
]


def role_of(event_name):
    for role, pattern in ROLES:
        if re.search(pattern, event_name):
            return role
    return "other"


def main(argv):
    del argv
    config = AlbertConfig.preset("base_v2")
    side_class = bench_model.Ours if FLAGS.side == "albert_tf" else bench_model.KerasHub
    side = side_class(config, policy=FLAGS.policy)
    batch = bench_model.make_batch(config, FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions)
    fn = (bench_model.make_train_step(side, False) if FLAGS.what == "train"
          else bench_model.make_infer_step(side, False))
    for _ in range(2):
        np.asarray(tf.nest.flatten(fn(batch))[0])
    wall, events = bench_model.op_events(fn, batch, FLAGS.steps)
    by_role, by_name = collections.Counter(), collections.Counter()
    for name, seconds in events:
        by_role[role_of(name)] += seconds
        by_name[re.sub(r"_\d+(?=[/:])", "", name)] += seconds
    total = sum(by_role.values())
    print(f"{FLAGS.side} {FLAGS.policy} {FLAGS.what}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}: {wall:.3f} s per step "
          f"(wall); traced op time {total:.3f} s per step; load average {bench_model.load_average()}")
    for role, seconds in by_role.most_common():
        print(f"  {1000 * seconds:9.1f} ms  {100 * seconds / total:5.1f} %  {role}")
    for name, seconds in by_name.most_common(FLAGS.top):
        print(f"  {1000 * seconds:9.1f} ms  {name[:160]}")


if __name__ == "__main__":
    app.run(main)
