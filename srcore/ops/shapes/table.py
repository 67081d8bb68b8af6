"""The shape-rule table (``srcore.ops.rule_table``, re-exported here: its old home)."""
from ..rule_table import RuleEntry, ShapeRuleTable  # noqa: F401
