"""The per-batch Chinese-restaurant-franchise sampler of the category/topic HDP."""

from noveld.models.kernels.hdp_sampler.sweeps import (
    _move_context,
    _open_category,
    move_token,
    new_table_weight,
    reseat_member,
    sample_batch,
    uniforms_needed,
)

__all__ = [
    "_move_context",
    "_open_category",
    "move_token",
    "new_table_weight",
    "reseat_member",
    "sample_batch",
    "uniforms_needed",
]
