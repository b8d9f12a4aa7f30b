"""The Proposer's side of KernelZero: what it is asked, how its modules are checked and admitted, and how the
Coder's failures feed back. Nothing here trains a model (that is train/); nothing here runs proposed code
outside the verifier's sandbox.

| stage | module | command |
|---|---|---|
| API catalog from a corpus of model code | catalog.py (syntax trees), corpus.py (corpora, cache, torch's operators) | `kernelzero proposer catalog` |
| co-occurrence counts and API-set sampling | cooccur.py | `kernelzero proposer pool` |
| the Proposer prompt; the template (no-model) Proposer | prompts.py + templates/; generator.py + genops.py | `kernelzero proposer propose` |
| generation through the Coder's backends, resumable | propose.py, records.py | `kernelzero proposer propose` |
| admission: syntax, dedup, runnable, numerical | admit.py, dedup.py, children.py, checks.py, suite.py | `kernelzero proposer admit` |
| frontier: success rates, next pool, Coder tasks | frontier.py | `kernelzero proposer frontier` |

The Frontier Reward itself is `kernelzero.rewards.frontier_reward`. Submodules are imported where needed, so
importing this package costs nothing.
"""
