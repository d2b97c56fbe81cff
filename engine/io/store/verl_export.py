"""Write a verl batch in a form CreditLens reads without unpickling: ``export_verl_batch(batch, "step.pt")``.

verl's own ways of saving a batch all pickle Python objects (``DataProto.save_to_disk`` pickles the DataProto,
``torch.save(batch.batch)`` a TensorDict, and ``non_tensor_batch["uid"]`` is a numpy object array), and loading a
pickle runs code, so CreditLens refuses them. This function, called in the trainer after the advantages are
computed (``RayPPOTrainer.fit``, after ``compute_advantage``), keeps the same field names but stores only plain
tensors, lists of strings/numbers and a small ``meta_info`` dict, which ``torch.load(weights_only=True)`` reads.
It needs neither verl nor tensordict imported: it reads ``batch.batch`` / ``batch.non_tensor_batch`` /
``batch.meta_info`` when present, else takes ``batch`` as a mapping of tensors.

docs/FORMAT.md ("verl batches") has the same in a few lines for a trainer that cannot import CreditLens.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

PLAIN = (str, int, float, bool, type(None))


def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """A dense CPU tensor that numpy and ``weights_only`` can hold: bf16/fp16 as float32, sparse densified."""
    value = value.detach().cpu()
    if value.layout != torch.strided:
        value = value.to_dense()
    if value.is_floating_point() and value.dtype != torch.float64:
        value = value.float()  # bf16/fp16 -> float32
    return value.contiguous()


def _plain_list(value: object) -> list | None:
    """A 1-D column of strings/numbers as a plain list (numpy scalars unwrapped); None for anything else."""
    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.ndim != 1:
        return None
    out = [x.item() if isinstance(x, np.generic) else x for x in arr.tolist()]
    return out if all(isinstance(x, PLAIN) for x in out) else None


def export_verl_batch(batch: object, path: str | Path) -> list[str]:
    """Write ``batch`` (a verl ``DataProto``, or a mapping of tensors) to ``path`` as a weights-only ``.pt``.

    Tensors keep their names (``responses``, ``attention_mask``, ``response_mask``, ``token_level_scores``,
    ``old_log_probs``, ``advantages``, …; bf16/fp16 become float32, sparse ones dense); 1-D non-tensor columns
    (``uid``, ``data_source``, reward extras) become lists of plain values. Returns the names of the fields that
    could not be stored that way (nested or object-valued columns such as ``multi_modal_inputs``), which are
    left out.
    """
    tensors = getattr(batch, "batch", batch)
    non_tensor = getattr(batch, "non_tensor_batch", None) or {}
    meta = getattr(batch, "meta_info", None) or {}
    out_batch, out_rows, skipped = {}, {}, []
    for key in list(tensors.keys()) if tensors is not None else []:
        value = tensors[key]
        if isinstance(value, torch.Tensor):
            out_batch[key] = plain_tensor(value)
        else:
            skipped.append(key)
    for key, value in non_tensor.items():
        column = _plain_list(value)
        if column is None:
            skipped.append(key)
        else:
            out_rows[key] = column
    out_meta = {k: v for k, v in meta.items() if isinstance(v, PLAIN)} if isinstance(meta, Mapping) else {}
    torch.save({"batch": out_batch, "non_tensor_batch": out_rows, "meta_info": out_meta}, str(path))
    return skipped
