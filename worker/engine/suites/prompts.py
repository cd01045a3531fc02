"""Speed-suite prompt text: a unique nonce first, then filler notes sized to a token target."""

from __future__ import annotations

import uuid

# Original filler: a harbour town's notebook. Plain prose, no lists or code, so every tokenizer
# sees ordinary text and the length calibration carries over between tasks.
NOTES = (
    "On Monday the ferry left eleven minutes late because a crate of lemons split on the ramp.",
    "The baker on Quay Street switched to rye after the wheat delivery was held at the border.",
    "A heron has started standing on the third mooring post every morning around half past six.",
    "Rain gauges at the lighthouse recorded nineteen millimetres between dusk and midnight.",
    "Two students repaired the library's window latch using a hairpin and a borrowed spanner.",
    "The fish market now closes at noon on Wednesdays so the stalls can be hosed down properly.",
    "Someone painted the bench outside the post office a bright green without asking anyone.",
    "By Tuesday evening the tide tables were off by four minutes, which the harbourmaster noted.",
    "A travelling knife grinder set up by the fountain and sharpened thirty blades before lunch.",
    "The school choir rehearsed in the boathouse because the hall roof was being retiled.",
    "Wind from the north-east pushed a raft of seaweed into the inner basin overnight.",
    "The pharmacist reported a run on sunscreen despite the cloudy forecast for the weekend.",
    "An old bicycle with a wicker basket was left chained to the harbour railings for six days.",
    "Three fishing boats came back early when the swell rose above two metres past the headland.",
    "The café started serving soup in mugs after running short of bowls on Thursday.",
    "A volunteer counted forty-two swallows on the telegraph wire above the chapel.",
    "Workers replaced the cracked paving stones near the bus shelter in a single afternoon.",
    "The museum lent its brass telescope to the primary school for a week of star watching.",
    "Fog rolled in on Friday morning thick enough that the foghorn sounded for two hours.",
    "A delivery van took the wrong turn at the chapel and reversed the length of Mill Lane.",
    "The allotment society argued for an hour about whether to allow beehives on plot nine.",
    "Someone found a message in a bottle, though it only advertised a sailing club in Brest.",
    "The clock on the town hall ran fast all week until a ladder was finally brought out.",
    "Local divers cleared a tangle of rope and netting from beneath the slipway.",
    "The greengrocer stacked pumpkins in a pyramid that lasted until a dog leaned on it.",
    "At the council meeting a proposal for a second pedestrian crossing passed by one vote.",
    "The evening bus was replaced by a minivan while its gearbox was rebuilt in the depot.",
    "Two seals were seen sleeping on the sandbank at low water on Saturday afternoon.",
    "The bookshop moved its maps to the front window after tourists kept asking for them.",
    "A power cut on Sunday lasted forty minutes and stopped every oven on the high street.",
    "The sailing club repainted its dinghies in club colours before the autumn regatta.",
    "Children built a dam across the stream behind the football pitch with flat stones.",
    "The weather vane on the church spire was found pointing south despite a northerly wind.",
    "An art class sketched the harbour from the sea wall and pinned the results in the café.",
    "The last ferry of the week carried a piano, a goat and a crate of garden gnomes.",
)

WORDS = " ".join(NOTES).split()


def new_nonce() -> str:
    """A fresh random tag; placed at the start of the prompt so no cached prefix can match."""
    return uuid.uuid4().hex[:16]


def filler(n_words: int, offset: int = 0) -> str:
    """``n_words`` words of notes, cycling through the notebook from ``offset``."""
    if n_words <= 0:
        return ""
    start = offset % len(WORDS)
    out = [WORDS[(start + i) % len(WORDS)] for i in range(n_words)]
    text = " ".join(out)
    return text if text.endswith(".") else text + "."


def speed_messages(nonce: str, instruction: str, n_words: int, offset: int = 0) -> list[dict]:
    """One user message: nonce, the notes, then the instruction."""
    body = filler(n_words, offset)
    parts = [f"Request {nonce}.", "Notes from the harbour office:"]
    if body:
        parts.append(body)
    parts.append(instruction)
    return [{"role": "user", "content": "\n\n".join(parts)}]
