"""keras_runner's model side in tf-keras: the bench's two models (bench_common.torch_model's layer
stacks, channels-last, 'same' padding), their losses and optimizers, and the step timer."""
import time

import numpy as np

import anchor_common


def build_model(keras, name, mixed=False):
    """The Sequential model, Keras's default initializers: Glorot-uniform kernels, zero biases.
    `mixed`: under the mixed_bfloat16 policy (set by the caller), the output layer in float32,
    as Keras's mixed-precision guide has its users do for the numerics of the loss."""
    layers = keras.layers
    shape, _ = anchor_common.MODELS[name]
    out = {"dtype": "float32"} if mixed else {}
    if name == "cifar-cnn":
        stack = [layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
                 layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
                 layers.Flatten(), layers.Dense(64, activation="relu"), layers.Dense(10, **out)]
    elif name == "mlp-41m":
        stack = [layers.Dense(4000, activation="tanh"), layers.Dense(2000, activation="relu"),
                 layers.Dense(500, activation="relu"), layers.Dense(300, activation="relu"),
                 layers.Dense(1, activation="sigmoid", **out)]
    else:
        raise ValueError(name)
    return keras.Sequential([keras.Input(shape), *stack], name=name.replace("-", "_"))


def make_loss(keras, name):
    """Mean over the batch: softmax cross-entropy on logits, or binary cross-entropy on the
    sigmoid output (tf-keras computes it from the sigmoid's logits)."""
    if anchor_common.MODELS[name][1] == 1:
        return keras.losses.BinaryCrossentropy()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def make_optimizer(keras, args):
    """anchor_common.OPTIMIZERS' settings. Adam: adaptive_epsilon=True, Algorithm 1 of Kingma &
    Ba as PyTorch and scalescope compute it (epsilon added after the bias correction). Keras's
    default (epsilon added to the uncorrected sqrt(v), 32x larger in effect at step 1) moves
    the loss 6e-5 relative after one step and past 1e-3 within 30 on CIFAR-like data; with it
    the losses agree with scalescope's to 1e-6 for 15 steps. Same cost either way."""
    o = anchor_common.optimizer_settings(args)
    if args.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate=o["lr"], beta_1=o["beta1"],
                                     beta_2=o["beta2"], epsilon=o["eps"], adaptive_epsilon=True)
    return keras.optimizers.SGD(learning_rate=o["lr"], momentum=o["momentum"])


def optimizer_settings(optimizer):
    """The optimizer's settings as JSON values (Adam's get_config lacks adaptive_epsilon)."""
    config = optimizer.get_config()
    if hasattr(optimizer, "adaptive_epsilon"):
        config["adaptive_epsilon"] = optimizer.adaptive_epsilon
    keys = ("name", "learning_rate", "beta_1", "beta_2", "epsilon", "adaptive_epsilon",
            "momentum", "nesterov")
    return {k: config[k] if isinstance(config[k], (str, bool)) else float(config[k])
            for k in keys if k in config}


def build_compiled(keras, args):
    """In the current strategy scope: the model with its initial weights, compiled."""
    keras.utils.set_random_seed(args.seed)
    mixed = args.precision == "bf16"
    # Keras's way to bf16: the mixed_bfloat16 policy (layers compute in bf16 on float32
    # variables); bf16 has float32's range, so no loss scaling.
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if mixed else "float32")
    model = build_model(keras, args.model, mixed)
    if args.weights:
        weights = anchor_common.keras_kernels(args.model, anchor_common.read_weights(args.weights))
        model.set_weights(weights)
    model.compile(optimizer=make_optimizer(keras, args),
                  loss=make_loss(keras, args.model), steps_per_execution=1)
    return model


def direct_loss(keras, args, model, first):
    """Step 0's loss by a plain forward pass: the mean of the replicas' mean losses."""
    loss = make_loss(keras, args.model)
    return float(np.mean([float(loss(y, model(x, training=False))) for x, y in first]))


def step_timer(keras):
    class StepTimer(keras.callbacks.Callback):
        """Per step: wall ms from batch begin to end, and the step's own loss."""

        def __init__(self):
            super().__init__()
            self.steps, self._t0 = [], None

        def on_train_batch_begin(self, batch, logs=None):
            self.model.reset_metrics()  # logs["loss"] becomes this step's loss, not a running mean
            self._t0 = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            loss = float(logs["loss"])
            self.steps.append({"ms": (time.perf_counter() - self._t0) * 1e3, "loss": loss})

    return StepTimer()
