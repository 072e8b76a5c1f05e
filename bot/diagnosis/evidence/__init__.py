"""Evidence intake: recognise the tool outputs and logs on-call engineers paste and attach
(`nvidia-smi -q`, `nvidia-smi nvlink`, `dcgmi diag`, `ibstat`/`ibstatus`, `perfquery`,
`ibqueryerrors`, `kubectl get node -o yaml` / `describe node`, vLLM, NCCL, kernel logs) and turn
them into typed findings and one verdict. One small module per format; `recognizing` dispatches.
Pure: no I/O (docs/evidence.md).
"""

from bot.diagnosis.evidence.model import EvidenceFinding, EvidenceLine, Parsed, Target
from bot.diagnosis.evidence.recognizing import EvidenceReport, judge, recognize

__all__ = [
    "EvidenceFinding",
    "EvidenceLine",
    "EvidenceReport",
    "Parsed",
    "Target",
    "judge",
    "recognize",
]
