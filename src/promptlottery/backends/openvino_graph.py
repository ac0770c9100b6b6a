"""The torch side of the OpenVINO conversion: the wrapper that is traced (logits at chosen positions
after cached keys and values, and the keys and values extended) and the bf16 storage of the linear
layers' weights. Used by :mod:`promptlottery.backends.openvino_local`."""

from __future__ import annotations

__all__ = ["store_linear_weights_bf16", "with_past"]


def store_linear_weights_bf16(model) -> int:
    """Store every linear layer's weight (the lm_head and embeddings excepted) as bfloat16, cast back
    to the activations' float32 where it is used, so the traced graph stays float32 and its weights
    are ``Constant(bf16) -> Convert(f32)``, which OpenVINO's CPU plugin reads as compressed weights."""
    import types

    import torch
    import torch.nn.functional as F  # noqa: N812

    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype), self.bias)

    n = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head"):
            module.weight = torch.nn.Parameter(module.weight.data.to(torch.bfloat16), requires_grad=False)
            module.forward = types.MethodType(forward, module)
            n += 1
    return n


def _with_past_module():
    import torch
    from transformers.cache_utils import DynamicCache, DynamicLayer

    class WithPast(torch.nn.Module):
        """The causal LM's logits at the positions ``keep`` (a 1-D index over the new tokens) after
        the cached keys and values ``past`` [layers, 2, rows, kv heads, cached, head dim], and the
        keys and values extended by the new tokens."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, keep, past):
            # the 4-D mask is built here, from the data, so the trace bakes in no branch of the
            # library's mask code; a padded query also sees itself (a row that sees nothing is NaN
            # in OpenVINO's attention, and a NaN value times weight 0 is NaN for the rows after it)
            new, total = input_ids.shape[1], attention_mask.shape[1]
            q = torch.ones_like(input_ids[0]).cumsum(0) - 1 + (total - new)
            k = torch.ones_like(attention_mask[0]).cumsum(0) - 1
            sees = ((k[None, :] <= q[:, None])[None, None] & attention_mask[:, None, None, :].bool()) | (
                k[None, :] == q[:, None]
            )[None, None]
            # cache layers filled directly: DynamicLayer's lazy start (a 1-D empty tensor
            # concatenated on dim -2) does not convert
            cache = DynamicCache()
            cache.layers = []
            for i in range(past.shape[0]):
                layer = DynamicLayer()
                layer.keys, layer.values, layer.device, layer.is_initialized = (
                    past[i, 0],
                    past[i, 1],
                    past.device,
                    True,
                )
                cache.layers.append(layer)
            out = self.model(
                input_ids=input_ids,
                attention_mask=sees,
                position_ids=position_ids,
                cache=cache,
                use_cache=True,
                logits_to_keep=keep,
            )
            present = getattr(out, "cache", None) or out.past_key_values
            return out.logits, torch.stack([torch.stack([lay.keys, lay.values]) for lay in present.layers])

    return WithPast


def with_past(model):
    """``model`` wrapped for conversion (the class is made on first use: torch is imported lazily)."""
    return _with_past_module()(model)
