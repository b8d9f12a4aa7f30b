"""Adapters that plug the kernel environment into RL engines; each module imports its engine only when used.

| module | engine | what it provides | how the engine calls it |
|---|---|---|---|
| `trl.py` | TRL 1.16 `GRPOTrainer` | `KernelRollout` (multi-turn `rollout_func`), `episode_reward` | `rollout_func(prompts, trainer)`, reward `(prompts, completions, **columns)` |
| `prime.py` | Prime Intellect `verifiers` 0.4 | `kernel_env_class()`: a `vf.Env` running G multi-turn attempts, CA-GRPO in `finalize` | `await env.run(task, agents)`, `await env.finalize(task, episode)` |
| `verl.py` | verl 0.9 custom reward | `VerlReward` (`compute_score`), `ca_grpo_scores` for an advantage estimator | `compute_score(data_source, solution_str, ground_truth, extra_info)` |
| `openrlhf.py` | OpenRLHF 0.11 `--reward.remote_url file.py` | `OpenRLHFReward` (`reward_func`) | `reward_func(queries, prompts, labels)` |

Every adapter scores with the same functions as `KernelEnv` (env/scoring.py), and tests check that an adapter's
reward equals the environment's for the same completions. verl and OpenRLHF score one sample at a time, so they
return c_i and S_i per sample; CA-GRPO's gate is a group-level step there (README shows where it goes).
"""
