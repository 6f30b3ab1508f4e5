"""``switchboard pairing``: let unknown users in, or take access back.

    switchboard pairing list [--json]            codes waiting for approval, and approved users
    switchboard pairing approve PLATFORM CODE    let the user who got CODE talk to the bot
    switchboard pairing revoke PLATFORM USER_ID  take an approval back
    switchboard pairing unlock PLATFORM          lift the lock that five wrong codes put on approvals

An unknown user who DMs the bot gets a code; they send it to you and you
approve it here (the gateway may keep running). Exit status: 0 on success,
1 when a code is unknown, expired or approvals are locked, 2 for configuration errors.
"""

from __future__ import annotations

import argparse
import json
import time

from config.models import PLATFORMS
from gateway.operations.cli.common import add_config_option, run_with_store
from gateway.inbound.pairing import ApprovalOutcome, Pairing
from storage import StorageEngine


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pairing", help="approve or revoke users who asked for access", description="Manage DM pairing."
    )
    commands = parser.add_subparsers(dest="pairing_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="pending codes and approved users")
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    listing.set_defaults(handler=list_command)
    approve = commands.add_parser("approve", help="approve a pairing code")
    approve.add_argument("platform", choices=PLATFORMS)
    approve.add_argument("code")
    approve.set_defaults(handler=approve_command)
    revoke = commands.add_parser("revoke", help="remove an approved user")
    revoke.add_argument("platform", choices=PLATFORMS)
    revoke.add_argument("user_id")
    revoke.set_defaults(handler=revoke_command)
    unlock = commands.add_parser("unlock", help="lift the lock five wrong codes put on a platform's approvals")
    unlock.add_argument("platform", choices=PLATFORMS)
    unlock.set_defaults(handler=unlock_command)
    for sub in (listing, approve, revoke, unlock):
        add_config_option(sub)


def list_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine) -> int:
        pending = await store.pairing.pending(time.time())
        approved = await store.pairing.approvals()
        if args.json:
            print(json.dumps({
                "pending": [{"platform": c.platform, "code": c.code, "user_id": c.user_id, "user_name": c.user_name,
                             "expires_at": c.expires_at} for c in pending],
                "approved": [{"platform": p, "user_id": u, "user_name": n, "approved_at": a} for p, u, n, a in approved],
            }, indent=2))  # fmt: skip
            return 0
        print("Waiting for approval:" if pending else "No codes waiting for approval.")
        for code in pending:
            minutes = max(0, int((code.expires_at - time.time()) // 60))
            print(f"  {code.platform:<9} {code.code}  user {code.user_id} ({code.user_name or '?'}), expires in {minutes} min")
        print("Approved users:" if approved else "No approved users.")
        for platform, user_id, user_name, at in approved:
            print(f"  {platform:<9} {user_id} ({user_name or '?'}), since {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))}")
        return 0

    return run_with_store(args, run, name="pairing")


def approve_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine) -> int:
        approval = await Pairing(store).approve(args.platform, args.code)
        if approval.outcome is ApprovalOutcome.APPROVED:
            name = f" ({approval.user_name})" if approval.user_name else ""
            print(f"Approved {args.platform} user {approval.user_id}{name}: they can talk to the bot now.")
            return 0
        print(f"Not approved: {approval.message}.")
        return 1

    return run_with_store(args, run, name="pairing")


def revoke_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine) -> int:
        if await Pairing(store).revoke(args.platform, args.user_id):
            print(f"Revoked {args.platform} user {args.user_id}: their messages are ignored now; "
                  "a DM from them gets a new pairing code (at most one every 10 minutes).")  # fmt: skip
            return 0
        print(f"{args.platform} user {args.user_id} was not approved.")
        return 1

    return run_with_store(args, run, name="pairing")


def unlock_command(args: argparse.Namespace) -> int:
    async def run(store: StorageEngine) -> int:
        unlock = await Pairing(store).unlock(args.platform)
        wrong = f"{unlock.cleared} wrong code{'s' if unlock.cleared != 1 else ''}"
        if unlock.was_locked:
            print(f"Unlocked approvals for {args.platform}: forgot {wrong}. "
                  f"`switchboard pairing approve {args.platform} CODE` works again.")  # fmt: skip
        elif unlock.cleared:
            print(f"Approvals for {args.platform} were not locked; forgot {wrong}, so five more are allowed.")
        else:
            print(f"Approvals for {args.platform} were not locked; nothing to do.")
        return 0

    return run_with_store(args, run, name="pairing")
