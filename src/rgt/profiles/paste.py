"""What a pasted line carries besides the failure, and whether it reports one at all.

A line reaches `rgt gotcha search` through a terminal, a chat, a forum or a log file; each adds
its own wrapping (a logger's prefix, colour codes, curly quotes, markdown, a shell prompt), and
each names the user's own paths and hosts. Both the rules and the guesses read the line through
`normalise`, and the guesses compare words only once `mask` has taken the user's names out.
"""

from __future__ import annotations

import re
import unicodedata

# A guess is only offered for a line that says something went wrong; an INFO line that shares
# three words with a gotcha ("wandb: W&B API key is configured") is not a symptom of it. A
# timeout being configured ("timeout to 30 minutes", "timeout=1800") is not one either.
_TROUBLE = re.compile(
    r"error|fail|fatal|exception|traceback|abort|crash|panic|killed|\bkill|refused|denied|"
    r"timed[ -]?out|timing out|\btime[ -]out\b|timeout(?!\s*(=|:\s*\d|to \d|of \d|set\b))|"
    r"unable|cannot|can't|couldn't|could not|\bnot\b|\bno\b|n't\b|missing|"
    r"\blost\b|\bgone\b|invalid|exceed|insufficient|violat|mismatch|wrong|corrupt|broken|"
    r"unreachable|reset|disconnect|\bdie[sd]?\b|\bdead\b|hang|\bhung\b|stuck|stall|frozen|"
    r"\bslow|vanish|disappear|wipe|evict|preempt|throttl|\boom\b|empty|zero|warn|still|"
    r"keeps?\b|never|again|instead",
    re.IGNORECASE)
# A count of zero reports that nothing went wrong: "Evicted 0 pods", "0 failed", "errors: 0".
_NONE_WRONG = re.compile(
    r"\b(?:evicted|failed|failures?|errors?|killed|warnings?|restarts?)\W{0,3}0\b(?![.,]\d)"
    r"|\b0 (?:\w+ )?(?:evicted|failed|failures?|errors?|killed|warnings?|restarts?)\b",
    re.IGNORECASE)
# A line whose own log level says it is informational (`NCCL INFO ...`, `[INFO]`, `I1206 ...`
# from glog) reports what a program did, not that it failed; its failures come at WARN or above.
_INFO_LEVEL = re.compile(r"(?:^|[\s\[|])(?:INFO|DEBUG|TRACE)(?=[\]:|\s])|^\s*\[?I\d{4} \d{2}:")

# Lines that report a state, not a failure, though they use a failure's words: a notice about the
# program's own interface (a deprecated flag or variable), a setting echoed at start ("Kill
# process group on exit: enabled"), a kubelet condition in its healthy state
# ("KubeletHasNoDiskPressure").
_NOT_A_FAILURE = re.compile(
    r"\bis deprecated\b|\bwill be removed\b"
    r"|:\s*(?:enabled|disabled|on|off|true|false|yes|no)\s*$"
    r"|\bKubeletHas(?:No|Sufficient)\w+|\bKubeletReady\b",
    re.IGNORECASE)

# Ordinary programming errors: Python's built-in exceptions for a mistake in the code or its
# configuration (the language reference's "concrete exceptions" a wrong name, key, index, type,
# syntax or import raises), pip's refusal of a package name it does not know, torch's tensors on
# two devices. A rented box does not cause them, so a guess that shares a word with a gotcha
# ("module", "training", "device") must not answer them; a detection rule still may.
_ORDINARY = re.compile(
    r"\b(?:KeyError|NameError|AttributeError|TypeError|IndexError|SyntaxError|"
    r"IndentationError|TabError|ZeroDivisionError|UnboundLocalError|RecursionError|"
    r"NotImplementedError|AssertionError|JSONDecodeError|UnicodeDecodeError|ValueError|"
    r"ModuleNotFoundError|ImportError|FileNotFoundError|FileExistsError|IsADirectoryError|"
    r"NotADirectoryError|StopIteration)\b"
    r"|\bNo module named\b|\bcannot import name\b|\bNon-existent config key\b"
    r"|\bNo matching distribution found for\b|\bCould not find a version that satisfies\b")
# torch's refusal to mix tensors on two devices is the code's, whatever devices it names.
_DEVICE_MIXUP = re.compile(
    r"\bExpected all tensors to be on the same device\b|\bto have the same device as\b")
# ... unless the line names what a rented box does cause: its GPU, driver and CUDA stack, its
# disks and memory, its network, the platform. "ImportError: libcuda.so.1" and "No matching
# distribution found for torch==2.1.0+cu121" stay open to guesses.
_BOX_WORDS = re.compile(
    r"cuda|cudnn|nccl|nvidia|nvml|\bgpu|\bdriver|\.so\b|\.so\.\d|\blib\w+\.so|torch\b|"
    r"torchvision|torchaudio|xformers|flash[-_]attn|bitsandbytes|triton|jax|tensorflow|"
    r"\bspace\b|\bdisk|quota|memory|\bram\b|/dev/shm|ssh|connection|network|timed? ?out|"
    r"/content/drive|/kaggle/|autodl|runpod|vast|lambda|slurm|kube",
    re.IGNORECASE)

# What a paste carries that is not part of the failure. A log line's own prefix (a timestamp,
# a level, a logger's `file:line]`), colour codes, quotes escaped by a repr or JSON, and runs of
# blanks: the same failure must read the same with or without them.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LOG_PREFIX = re.compile(
    r"^\s*(?:"
    r"\[?\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"  # a timestamp
    r"(?:Z|[+-]\d{2}:?\d{2})?\]?:?"
    r"|\[rank\d+\]:?"  # torch's per-rank tag
    r"|\[?[IWEF]\d{4} \d{2}:\d{2}:\d{2}(?:\.\d+)?(?:\s+\d+)?\s+[\w./-]+:\d+\]"  # glog
    r"|[IWEDC] \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? [\w./-]+:\d+\]"  # SkyPilot, vLLM
    r"|[IWEF] [\w./-]+\.\w+:\d+\]"  # TensorFlow's `E tensorflow/.../x.cc:314]`
    r"|\[[\w./-]+\.py:\d+(?::\w+)?\]"  # DeepSpeed's `[launch.py:320:sigkill_handler]`
    r"|\[(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL|[IWEF])\]"
    r"|(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL)(?: [\w./-]+\.py:\d+ --|(?::[\w.]+)*:)"
    r")\s*")
_ESCAPED_QUOTE = re.compile(r"\\+(['\"])")
_BLANKS = re.compile(r"\s+")
# Typography a paste picks up on its way through a chat, a forum or a word processor: curly and
# full-width quotes (NFKC folds the other full-width forms and non-breaking spaces), markdown
# emphasis and code spans around the line, a quote or list marker, a shell prompt. A longer run of
# asterisks is the program's own (Slurm's `*** JOB 42 CANCELLED ... ***`), not emphasis.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                         "\u2032": "'", "\u00b4": "'", "\u201c": '"', "\u201d": '"',
                         "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"',
                         "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-"})
_MARKDOWN = re.compile(r"(?<!\*)\*\*(?!\*)|__(?=\S)|(?<=\S)__|```\w*|`")
_LEAD = re.compile(r"^\s*(?:>\s*)+|^\s*[-*+]\s+|^\s*(?:[\w.@-]+[:~][^\s$#]*)?[$#%]\s+")
# Other log prefixes: syslog's `Nov 20 10:00:00 host proc[12]:`, the kernel's `[ 1234.5678]`,
# a bare clock `12:00:01` or `[12:00:01]`, `kubectl logs --prefix`'s `[pod/name/container]`,
# docker compose's `service-1  |`. sshd's own syslog lines keep their tag: there `Connection
# closed by <addr> port <n>` is a client leaving, not the client-side failure U59 reads.
_SYSLOG = re.compile(
    r"^\s*(?:"
    r"[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} [\w.-]+ (?!sshd\b)[\w./-]+(?:\[\d+\])?:"
    r"|\[\s*\d+\.\d+\]"
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?(?= )"
    r"|\[pod/[\w./-]+\]"
    r"|[\w.-]+[-_]\d+\s+\|"
    r")\s*")
# Masked before words are compared: they name this user's files and hosts, not the failure.
_NOISE = re.compile(
    r"[a-z][a-z0-9+.-]*://\S+"  # URLs
    r"|(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@%+~-]+)+/?"  # POSIX paths
    r"|\b[a-z]:\\\S+"  # Windows paths
    r"|\b0x[0-9a-f]+\b|\b[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b"  # addresses, hashes, uuids
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b",  # IPv4 addresses
    re.IGNORECASE)


def normalise(text: str) -> str:
    """`text` without what a paste adds around a failure: colour codes, the log prefix
    (timestamps, levels, `file.py:123]`, syslog's host and tag), backslash-escaped quotes, curly
    and full-width punctuation (NFKC), markdown emphasis and code spans, a quote marker or
    shell prompt, runs of blanks."""
    line = unicodedata.normalize("NFKC", _ANSI.sub("", text)).translate(_QUOTES)
    line = _ESCAPED_QUOTE.sub(r"\1", _MARKDOWN.sub("", line))
    for _ in range(4):  # `[2023-..] [ERROR] [launch.py:320] ...` stacks prefixes
        stripped = _LOG_PREFIX.sub("", line, count=1)
        stripped = _SYSLOG.sub("", _LEAD.sub("", stripped, count=1), count=1)
        if stripped == line:
            break
        line = stripped
    return _BLANKS.sub(" ", line).strip()


def mask(text: str) -> str:
    """`text` normalised, with URLs, paths, addresses and hex ids blanked: they name this user's
    files and hosts, not the failure."""
    return _NOISE.sub(" ", normalise(text))


def ordinary_error(text: str) -> bool:
    """Whether the line is an ordinary programming error (a KeyError, a module not found, a
    package pip does not know) that names nothing a rented box causes."""
    line = normalise(text)
    return bool(_DEVICE_MIXUP.search(line)
                or (_ORDINARY.search(line) and not _BOX_WORDS.search(line)))


def reports_trouble(text: str) -> bool:
    """Whether the line says something went wrong: a count of zero ("0 failed") does not, nor
    does a line logged at an informational level or one that reports a healthy state."""
    return (not _INFO_LEVEL.search(text) and not _NOT_A_FAILURE.search(text)
            and bool(_TROUBLE.search(_NONE_WRONG.sub(" ", text))))
