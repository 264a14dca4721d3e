import sys
from pathlib import Path

# Test helper modules (cli.py, sshd.py) are imported by name from any test folder.
sys.path.insert(0, str(Path(__file__).parent))
