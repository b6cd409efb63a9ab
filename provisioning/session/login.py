"""The session make remote's options open: the login (SFTP required for transfers), the host key it was
checked against, the preflight probe's facts and decision, the remote folder's absolute path."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from provisioning.session import decidable, preflight
from provisioning.session.connection import Remote, RemoteError, fingerprint
from provisioning.session.options import RemoteOptions, needs_gpu
from provisioning.session.steps import Steps


def connect(opts: RemoteOptions) -> Remote:
    remote = Remote.open(
        opts.host,
        key=opts.key,
        known_hosts=opts.known_hosts,
        accept_new_host=opts.accept_new_host,
        ssh_config=opts.ssh_config,
    )
    remote.connect()
    return remote


def connect_for_transfers(opts: RemoteOptions) -> Remote:
    """A connection that can ship and fetch: an endpoint without SFTP (a proxied relay) is refused
    here, before anything is shipped or run."""
    remote = connect(opts)
    try:
        remote.sftp()
    except RemoteError:
        remote.close()
        raise
    return remote


def host_key_record(remote: Remote) -> dict[str, Any]:
    key = remote.conn.client.get_transport().get_remote_server_key()
    first = [asdict(f) for f in remote.first_use]
    record = {
        "name": remote.target.known_hosts_name,
        "type": key.get_name(),
        "fingerprint": fingerprint(key),
        "accepted_on_first_use": bool(first),
        "known_hosts": str(remote.known_hosts),
    }
    if remote.hops:  # the ProxyJump gateways, each checked against known_hosts like the box
        record["via"] = [
            {
                "name": h.target.known_hosts_name,
                "fingerprint": fingerprint(h.conn.client.get_transport().get_remote_server_key()),
            }
            for h in remote.hops
        ]
    return record


def run_preflight(
    remote: Remote, opts: RemoteOptions, steps: Steps
) -> tuple[preflight.HostFacts, preflight.Decision]:
    r = remote.run(preflight.probe_command(opts.remote_dir), timeout=60, what="the preflight probe failed")
    facts = preflight.parse_probe(r.stdout)
    decision = preflight.decide(
        facts,
        runtime=opts.runtime,
        needs_gpu=needs_gpu(opts.profile),
        image=opts.image,
        cuda_line=opts.cuda_line,
    )
    for line in facts.summary():
        steps.say(line)
    for note in decision.notes:
        steps.say(f"note: {note}")
    if decision.runtime and facts.gpus:  # before any billed stage: what this box can decide, and what not
        for line in decidable.lines(facts, decision.runtime):
            steps.say(line)
    return facts, decision


def resolve_base(remote: Remote, remote_dir: str) -> str:
    """The remote folder's absolute path on the host ('' when it does not exist); REMOTE_DIR='' by
    preflight's rule (a mounted persistent volume's cardtime/, else ~/cardtime), as `make remote` chose it."""
    return remote.run(preflight.resolve_dir_command(remote_dir), check=False).stdout.strip()
