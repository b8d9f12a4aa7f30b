"""The command line takes its choices from the registries (types.PROFILES, verify.backends.BACKENDS), so adding a
profile or a backend needs no edit here."""

from kernelzero.types import PROFILES


def test_cli_choices_come_from_the_registries():
    from kernelzero.cli import build_parser
    from kernelzero.verify.backends import BACKENDS

    actions = {a.dest: a for a in build_parser()._subparsers._group_actions[0].choices["verify"]._actions}
    assert tuple(actions["backend"].choices) == tuple(BACKENDS)
    assert tuple(actions["profile"].choices) == tuple(PROFILES)
