"""CLI commands for campaigns: ``submit`` a spec to a results server, run an ``agent`` that works its jobs.

Thin: parse options, call ``accelbench.client`` (httpx only; the agent needs no database or FastAPI).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import click

from accelbench.commands import server_options


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    from accelbench.client.agent import parse_labels

    try:
        return parse_labels(pairs)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--label") from None


@click.command("agent")
@server_options("runner")
@click.option("--target", "target_id", required=True, help="The catalog id this host measures as.")
@click.option(
    "--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label jobs may ask for (repeat)."
)
@click.option("--once", is_flag=True, help="Take one job, run it, and exit (ephemeral cloud hosts).")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    default="accelbench-agent",
    show_default=True,
    help="Where jobs run (variants, results, logs), one folder per job.",
)
@click.option("--name", default="", help="Runner name shown on the runners page [default: HOST-TARGET].")
@click.option("--quiet", is_flag=True, help="No pipeline progress lines; only one line per job.")
@click.option(
    "--idle-exit",
    "idle_exit_s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Exit when no job came for this long (a rented host with nothing to do stops billing).",
)
@click.pass_context
def agent_cmd(
    ctx: click.Context,
    server: str,
    token: str | None,
    target_id: str,
    labels: tuple[str, ...],
    once: bool,
    work_dir: str,
    name: str,
    quiet: bool,
    idle_exit_s: float | None,
) -> None:
    """Long-poll SERVER for jobs of --target and run each (quantize, serve, sweep), pushing results.

    SIGTERM or Ctrl-C: the running step finishes, what it measured is pushed, and the job goes back to the queue.
    """
    from accelbench.client.agent import AgentConfig, run_agent
    from accelbench.loadtests.events import Cancel

    cfg = AgentConfig(
        server=server,
        target=target_id,
        token=token,
        labels=_labels(labels),
        once=once,
        work_dir=Path(work_dir),
        name=name,
        catalog_path=(ctx.obj or {}).get("catalog_path"),
        quiet=quiet,
        idle_exit_s=idle_exit_s,
    )
    stop = Cancel()
    # both signals: finish the running step, push it, release the job (restored after: tests call this in-process)
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: stop.request(f"signal {signum}"))
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        outcomes = run_agent(cfg, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo(json.dumps(outcomes, sort_keys=True))


@click.command("submit")
@click.argument("spec", type=click.Path(dir_okay=False))
@server_options("admin")
@click.option(
    "--lease-s",
    type=click.FloatRange(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="A job whose agent sends no heartbeat for this long goes back to the queue.",
)
@click.option("--max-attempts", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option(
    "--time-limit-s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A job running longer than this from its claim is revoked, heartbeats or not [default: the server's].",
)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label every job asks for.")
@click.option("--wait", is_flag=True, help="Wait until every job finished; exit 1 unless all are done.")
@click.pass_context
def submit_cmd(
    ctx: click.Context,
    spec: str,
    server: str,
    token: str | None,
    lease_s: float,
    max_attempts: int,
    time_limit_s: float | None,
    labels: tuple[str, ...],
    wait: bool,
) -> None:
    """Turn SPEC into a campaign on SERVER: one job per measured target; prints the campaign's page."""
    from accelbench.answers import Campaign
    from accelbench.client.http import ServerClient
    from accelbench.errors import BadInputError
    from accelbench.experiment.spec import load_spec

    load_spec(spec)  # a bad spec is one line here, before anything is sent
    try:
        text = Path(spec).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"{spec}: cannot read the spec: {err}") from None
    with ServerClient(server, token, retry_s=10.0, scope="admin") as api:
        body = {
            "spec": text,
            "lease_s": lease_s,
            "max_attempts": max_attempts,
            "labels": _labels(labels),
            "time_limit_s": time_limit_s,
        }
        campaign = api.answer(Campaign, "POST", "/campaigns", body)
        click.echo(
            f"campaign {campaign.id}: {len(campaign.jobs)} job(s) "
            f"({', '.join(j.target for j in campaign.jobs)}); {api.url}{campaign.url}"
        )
        if wait:
            while campaign.status in ("queued", "running"):
                time.sleep(2.0)
                campaign = api.answer(Campaign, "GET", f"/campaigns/{campaign.id}")
            for job in campaign.jobs:
                click.echo(f"  {job.target}: {job.status}" + (f" ({job.reason})" if job.reason else ""))
            ctx.exit(0 if campaign.status == "done" else 1)


@click.group("job")
def job_group() -> None:
    """Cancel or requeue campaign jobs on a results server (admin token)."""


def _job_change(event: str, job_ids: tuple[int, ...], server: str, token: str | None) -> None:
    from accelbench.answers import Job
    from accelbench.client.http import Conflict, ServerClient
    from accelbench.errors import BadInputError

    with ServerClient(server, token, retry_s=10.0, scope="admin") as api:
        for job_id in job_ids:
            try:
                job = api.answer(Job, "POST", f"/jobs/{job_id}/{event}", {})
            except Conflict as err:  # its state does not allow it (e.g. cancel a finished job)
                raise BadInputError(f"{api.url}: {err}") from None
            click.echo(f"job {job.id} ({job.target}): {job.status}")


@job_group.command("cancel")
@click.argument("job_ids", nargs=-1, required=True, type=click.IntRange(1))
@server_options("admin")
def job_cancel_cmd(job_ids: tuple[int, ...], server: str, token: str | None) -> None:
    """Cancel queued or running jobs; a running job's agent is told to stop at its next heartbeat."""
    _job_change("cancel", job_ids, server, token)


@job_group.command("requeue")
@click.argument("job_ids", nargs=-1, required=True, type=click.IntRange(1))
@server_options("admin")
def job_requeue_cmd(job_ids: tuple[int, ...], server: str, token: str | None) -> None:
    """Put running, failed, expired or cancelled jobs back in the queue with a fresh set of attempts."""
    _job_change("requeue", job_ids, server, token)


def register(group: click.Group) -> None:
    """Add the campaign commands to the top-level group."""
    for command in (agent_cmd, submit_cmd, job_group):
        group.add_command(command)
