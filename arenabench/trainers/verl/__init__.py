"""verl adapter: tournament rewards in verl's GRPO / CISPO training (verl 0.9, its own venv).

* ``reward_manager`` — ``ArenaRewardManager``, a reward-loop manager whose group barrier
  (``barrier``) gathers each prompt's N responses and scores all ready groups in one engine run
  (``scoring``, on the adapters' shared kit ``arenabench.trainers.scoring``);
* ``reward_workers`` — the reward worker's Ray concurrency sized to a step (Ray's default 1000
  would stall larger steps in the barrier);
* ``advantage`` — the ``arenabench`` advantage estimator (constructor advantages, passed through);
* ``launch`` — ``arenabench-verl``, verl's ``main_ppo`` over ``conf/verl``;
* ``tiny_model`` — the copy task's tiny model (``arenabench.tiny_model``) and a verl-format toy
  dataset, built locally (smoke tests);
* ``cpu`` — ``trainer.device=cpu``: verl's whole loop on the host CPU (a platform, FSDP engines and
  an ``hf`` rollout backend registered through verl 0.9.1's extension points).

Only the submodules import verl, Ray and transformers; importing this package does not.
"""
