"""The public names of `agent_health`, written once: what each name is, for type checkers and
editors (a PEP 484 stub, read instead of __init__.py), and the list the package itself reads.

agent_health/__init__.py imports each `from MODULE import NAME as NAME` below from MODULE on first
use, and derives `__all__` and `dir()` from this file with the names annotated at the end
(`agent_health.lazy.stub_names`). A new public name is one line here; tests/core/test_public_names.py
checks that every name listed resolves.
"""

from agent_health.analysis.frames import results_frame as results_frame
from agent_health.config import AgentSpec as AgentSpec
from agent_health.config import Config as Config
from agent_health.config import JudgeSettings as JudgeSettings
from agent_health.config import define_config as define_config
from agent_health.config import load_config as load_config
from agent_health.errors import AgentError as AgentError
from agent_health.errors import AgentHealthError as AgentHealthError
from agent_health.errors import ConfigError as ConfigError
from agent_health.errors import ConversationError as ConversationError
from agent_health.errors import EvalFileError as EvalFileError
from agent_health.errors import InfrastructureError as InfrastructureError
from agent_health.errors import TracesNotEnabled as TracesNotEnabled
from agent_health.errors import TracesUnavailable as TracesUnavailable
from agent_health.errors import UsageError as UsageError
from agent_health.judges.kit import ConversationGoal as ConversationGoal
from agent_health.judges.kit import Factuality as Factuality
from agent_health.judges.kit import Judge as Judge
from agent_health.judges.kit import KnowledgeRetention as KnowledgeRetention
from agent_health.judges.kit import RoleAdherence as RoleAdherence
from agent_health.judges.kit import StructuredOutputJudge as StructuredOutputJudge
from agent_health.judges.kit import ToolCallJudge as ToolCallJudge
from agent_health.judges.kit import TurnsToGoal as TurnsToGoal
from agent_health.judges.kit import create_judge as create_judge
from agent_health.judges.rubric import Rubric as Rubric
from agent_health.judges.rubric import load_rubric as load_rubric
from agent_health.loader import LoadedTest as LoadedTest
from agent_health.loader import LoadResult as LoadResult
from agent_health.loader import load_tests as load_tests
from agent_health.model import SCHEMA_VERSION as SCHEMA_VERSION
from agent_health.model import ContextItem as ContextItem
from agent_health.model import Conversation as Conversation
from agent_health.model import EvalRun as EvalRun
from agent_health.model import ExpectedStep as ExpectedStep
from agent_health.model import Insight as Insight
from agent_health.model import JudgeIdentity as JudgeIdentity
from agent_health.model import Judgement as Judgement
from agent_health.model import Provenance as Provenance
from agent_health.model import RunReport as RunReport
from agent_health.model import RunResult as RunResult
from agent_health.model import RunSettings as RunSettings
from agent_health.model import RunSummary as RunSummary
from agent_health.model import Signal as Signal
from agent_health.model import SimulatedUser as SimulatedUser
from agent_health.model import Step as Step
from agent_health.model import TestCase as TestCase
from agent_health.model import TestResult as TestResult
from agent_health.model import TrialResult as TrialResult
from agent_health.model import Turn as Turn
from agent_health.model import Usage as Usage
from agent_health.model import Verdict as Verdict
from agent_health.sdk import AgentProxy as AgentProxy
from agent_health.sdk import TestInfo as TestInfo
from agent_health.sdk import after_all as after_all
from agent_health.sdk import after_each as after_each
from agent_health.sdk import before_all as before_all
from agent_health.sdk import before_each as before_each
from agent_health.sdk import describe as describe
from agent_health.sdk import expect as expect
from agent_health.sdk import fixture as fixture
from agent_health.sdk import judge as judge
from agent_health.sdk import test as test
from agent_health.sdk import use_judges as use_judges
from agent_health.session import RunOutcome as RunOutcome
from agent_health.session import build_settings as build_settings
from agent_health.session import run_evaluation as run_evaluation
from agent_health.session import run_tests as run_tests
from agent_health.session.rejudge import RejudgeOutcome as RejudgeOutcome
from agent_health.session.rejudge import rejudge as rejudge
from agent_health.traces.view import TracesView as TracesView

__version__: str
agent: AgentProxy  # the current test's agent (an AgentProxy made on first use)
