"""One worker of a two-worker MultiWorkerMirroredStrategy run on CPU (dfctl tests/data/logs): argv[1] is this
worker's index. Both started: tf_multiworker_healthy.log (worker 0); worker 1 never started:
tf_multiworker_straggler.log (worker 0, ended by `timeout -s KILL 60` while it waited)."""
import json, os, sys
index = int(sys.argv[1])
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["127.0.0.1:23471", "127.0.0.1:23472"]},
                                      "task": {"type": "worker", "index": index}})
import tensorflow as tf
print(f"worker {index} of 2: building the strategy", flush=True)
strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("replicas in sync:", strategy.num_replicas_in_sync, flush=True)
with strategy.scope():
    w = tf.Variable(3.0)
opt = tf.keras.optimizers.SGD(0.1) if hasattr(tf.keras.optimizers, "SGD") else None


@tf.function
def step():
    def replica():
        with tf.GradientTape() as tape:
            loss = (w - 1.0) ** 2
        g = tape.gradient(loss, w)
        g = tf.distribute.get_replica_context().all_reduce("mean", g)
        w.assign_sub(0.1 * g)
        return loss
    return strategy.reduce("mean", strategy.run(replica), axis=None)


for i in range(5):
    print(f"step {i} loss {float(step()):.4f}", flush=True)
print("done", flush=True)
