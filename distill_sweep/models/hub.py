"""The Hugging Face hub, offline-aware: honour HF_HUB_OFFLINE set after import, and go offline at once when the
hub cannot be reached (instead of every download retrying for ~30 s)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def hub_offline_requested() -> bool:
    true = {"1", "ON", "YES", "TRUE"}
    return any(
        os.environ.get(v, "").upper() in true
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


@contextlib.contextmanager
def honour_offline_env() -> Iterator[None]:
    """Apply HF_HUB_OFFLINE as set *now*: datasets/huggingface_hub read it once at import time.

    Without this, setting the variable after import (tests, notebooks) still makes load_dataset retry
    the network for ~20 s before failing.
    """
    if not hub_offline_requested():
        yield
        return
    import datasets.config
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


# endpoint -> why it could not be reached (None: reachable); probed at most once per process
_HUB_PROBES: dict[str, str | None] = {}


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """Why the hub endpoint cannot be reached (one HEAD request, once per process), or None if it can.

    Only a failure to connect counts (DNS, refused, timeout): any HTTP answer means the hub is there.
    Goes through huggingface_hub's own HTTP session, so HF_ENDPOINT and proxy settings apply as they do
    for the real downloads.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint = constants.ENDPOINT
    if endpoint not in _HUB_PROBES:
        try:
            get_session().head(endpoint, timeout=timeout)
            _HUB_PROBES[endpoint] = None
        except Exception as err:  # noqa: BLE001 - httpx/requests/OS errors alike mean "cannot connect"
            first = str(err).strip().splitlines()[0][:160] if str(err).strip() else ""
            _HUB_PROBES[endpoint] = f"{endpoint}: {type(err).__name__}{': ' + first if first else ''}"
    return _HUB_PROBES[endpoint]


def go_offline_if_hub_unreachable(timeout: float = 3.0) -> str | None:
    """Switch huggingface_hub/datasets/transformers to offline mode if the hub cannot be reached.

    Returns the reason when it did (None otherwise). Without this, every hub call with no network
    retries with backoff (5 retries, ~30 s, two warnings each) before failing; offline, files already
    in the local HF cache still load and anything else fails at once. Process-wide on purpose: the
    next hub call (tokenizer, model) would wait for the same dead network. Call before any hub access.
    """
    if hub_offline_requested():
        return None  # offline already: honour_offline_env applies it
    import huggingface_hub.constants as hub_constants

    if hub_constants.HF_HUB_OFFLINE:
        return None
    reason = hub_unreachable_reason(timeout)
    if reason is not None:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    return reason
