"""ldpkit: local differential privacy, fast, exact and tested."""

from . import consistency, metrics, numeric, queries, stream
from ._rng import as_generator, secure_generator, spawn
from .accountant import BudgetExceededError, PrivacyAccountant
from .aggregator import Aggregator
from .encoder import Encoder
from .estimate import FrequencyEstimate
from .frequency import *  # noqa: F403 - every oracle and helper is public at top level
from .frequency import __all__ as _frequency_all
from .privacy import privacy_loss, shuffle_amplification, split_budget
from .question import Question, load_questions, save_questions
from .spec import Mechanism, Reports, Stats
from .survey import Survey

__version__ = "0.1.0"

__all__ = [
    "Aggregator",
    "BudgetExceededError",
    "PrivacyAccountant",
    "Question",
    "Survey",
    "load_questions",
    "save_questions",
    "shuffle_amplification",
    "consistency",
    "queries",
    "as_generator",
    "secure_generator",
    "spawn",
    "Encoder",
    "FrequencyEstimate",
    "privacy_loss",
    "split_budget",
    "Mechanism",
    "Reports",
    "Stats",
    "stream",
    "metrics",
    "numeric",
]
__all__ += [name for name in _frequency_all if name != "ORACLES"]
