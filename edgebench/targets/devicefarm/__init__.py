"""AWS Device Farm as a target: ``--targets devicefarm:PROJECT/POOL`` runs Google's benchmark_model on
every Android phone of a Device Farm device pool and returns one summary row per phone (``target``:
the flow, costs and quotas; ``package``: what is uploaded and run on the phone; ``aws``: the boto3
client of the optional ``devicefarm`` extra, its errors, the pre-signed transfers). docs/devicefarm.md
is the user's page."""

from edgebench.targets.devicefarm.target import PREFIX, SPEC_HELP, DeviceFarmTarget, parse_spec

__all__ = ["PREFIX", "SPEC_HELP", "DeviceFarmTarget", "parse_spec"]
