"""What the notebook platforms (Colab, Kaggle) share: the notebook and bundle they run
(build.py) and the staging folder on this machine that stands for the box (staging.py)."""
