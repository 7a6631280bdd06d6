"""Hydra launchers ``hydra/launcher=submitit_slurm`` / ``submitit_local`` with arenabench's stacked
seeds: hydra's own submitit launcher (``pip install '.[cluster]'``, the ``hydra-submitit-launcher``
plugin) submitting one scheduler job per *seed group* — the batch the local launcher
(``hydra/launcher=arenabench``) would train in one worker — instead of one per job. Its configs are
``conf/hydra/launcher/submitit_{slurm,local}.yaml``; the classes live in :mod:`.launcher`, imported
only when such a launcher is chosen (this package stays importable without submitit)."""
