"""Prints the anchor systems' versions as JSON (and fails if one does not import)."""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402
import torch  # noqa: E402

print(json.dumps({"tensorflow": tf.__version__, "tf_keras": tf_keras.__version__,
                  "torch": torch.__version__, "numpy": numpy.__version__,
                  "torch_mkldnn": torch.backends.mkldnn.is_available()}))
