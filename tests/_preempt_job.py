"""A small model.fit that records every batch the model trains on; run by test_preemption.py.

Usage: python _preempt_job.py DATA BACKUP_DIR RECORD_FILE MODE [KILL_EPOCH KILL_BATCH]

MODE: "epochs" (repeat=False, one iteration per Keras epoch), "endless"
(repeat=True with steps_per_epoch), "mirrored-endless" (the same under a
MirroredStrategy of two logical CPUs, the pipeline built by
distribute_datasets_from_function: each step takes two of its batches),
"mirrored-epochs" (that strategy and "epochs": its 3 batches end at a whole
step, 2), or "nosync" (like "epochs" without SyncEpochs: the control). With
KILL_*, the process SIGKILLs itself after that batch of that epoch, as a
scheduler's preemption would.
"""

import os
import signal
import sys

import keras
import numpy as np
import tensorflow as tf

import bzna_tf

data, backup, record, mode = sys.argv[1:5]
kill = tuple(int(v) for v in sys.argv[5:7]) if len(sys.argv) > 5 else None
mirrored = mode.startswith("mirrored")
if mirrored:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
ds = bzna_tf.Dataset(data, track="bzna_thumb")  # every picture (3 of the fixture's 12 are unlabelled)
endless = mode in ("endless", "mirrored-endless")


def pipeline(input_context=None):
    return ds.as_dataset(
        batch_size=4,
        shuffle=True,
        seed=7,
        warp=bzna_tf.layers.RandomResizedCrop(16, 16, flip_h=0.5),
        repeat=endless,
        drop_remainder=True,
        input_context=input_context,
    )


state = {"epoch": None}


def note(x):
    with open(record, "a") as f:
        f.write(f"{state['epoch']} {float(np.sum(x.numpy().astype(np.float64) * np.arange(1, 4))):.6f}\n")
    return np.float32(0)


class Record(keras.layers.Layer):
    def call(self, x):
        tf.py_function(note, [x], tf.float32)
        return x


class Control(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        state["epoch"] = epoch

    def on_train_batch_end(self, batch, logs=None):
        if kill == (state["epoch"], batch):
            os.kill(os.getpid(), signal.SIGKILL)


def labelled(train):
    # The pictures only (what the record is about): fit gets a copy with label 0, SyncEpochs the original.
    return train.map(lambda x: (x, tf.zeros(tf.shape(x)[:1], tf.int64)))


strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if mirrored else tf.distribute.get_strategy()
with strategy.scope():
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), Record(), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
if mirrored:
    built = []  # the pipeline the function builds (SyncEpochs sets its counter)

    def replicas_feed(ctx):
        built.append(pipeline(ctx))
        return labelled(built[-1])

    feed = strategy.distribute_datasets_from_function(replicas_feed)
    train = built[0]
else:
    train = pipeline()
    feed = labelled(train)
callbacks = [keras.callbacks.BackupAndRestore(backup), Control()]
if mode != "nosync":
    callbacks.append(bzna_tf.callbacks.SyncEpochs(train))
model.fit(feed, epochs=3, steps_per_epoch=5 if endless else None, callbacks=callbacks, verbose=0)
