import sys
from pathlib import Path

HERE = Path(__file__).parent
FAKE_COLAB = HERE / "fake_colab"  # holds google/colab: PYTHONPATH for a notebook kernel

sys.path.insert(0, str(HERE))
