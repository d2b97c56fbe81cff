"""The Learn page's tabs, one module each, every one with ``draw(ctx)``: ``kgr1`` (KG-R1's structured rewards,
then the same steps on the sidebar's run), ``rllm`` (rLLM's three advantage modes) and ``pipeline``
(``compute_credit``'s stages and the policy losses, with their code). They draw; ``dashboard.teach`` and
``dashboard.services`` compute."""
