"""What the runs app tells the apps above it (they connect; runs imports none of them)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent by runs.services.refresh_stack_stats inside its transaction, after the lanes are written,
# with `boards`: the (hardware class id, score scale, version) boards whose lanes changed. A
# receiver that keeps something worked out from a board's lanes writes it again in the same
# transaction, so it is never seen out of step with them.
lanes_changed = Signal()
