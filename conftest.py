"""Collection rules for the whole checkout (pytest collects tests/ and, for the
docstring examples, kernelgrad/).

* ``kernelgrad/as_torch.py`` is never imported by pytest: importing it makes ``torch``
  mean kernelgrad for the rest of the process (its purpose), which would turn every
  later PyTorch comparison into a comparison of kernelgrad with itself.
* ``kernelgrad/utils/tensorboard.py`` needs the optional ``tensorboard`` package.
"""

from __future__ import annotations

import importlib.util

collect_ignore = ["kernelgrad/as_torch.py"]
if importlib.util.find_spec("tensorboard") is None:
    collect_ignore.append("kernelgrad/utils/tensorboard.py")
