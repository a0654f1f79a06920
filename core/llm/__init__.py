"""Calling models: one small client interface with litellm behind it (``client``) and the offline demo
model (``demo_model``).
"""

from core import public_api

__all__, __getattr__ = public_api(
    __name__,
    {
        "client": ("DemoClient", "LLMClient", "LLMReply", "LiteLLMClient", "default_client", "one_line", "warm_up"),
        "demo_model": ("demo_usage",),
        "errors": ("LLMError",),
    },
)
