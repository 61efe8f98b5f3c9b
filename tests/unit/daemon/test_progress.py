"""Progress lines say how far into a file a long run is and about how long is left."""

from __future__ import annotations

import io

from noveld.daemon.progress import Progress
from noveld.daemon.stages.report import BatchReport


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_file_run_shows_its_share_and_the_time_left() -> None:
    clock, out = _Clock(), io.StringIO()
    share = [0.2]  # a resumed run: a fifth of the file was read before
    progress = Progress(out, interval_s=1.0, clock=clock)
    progress.follow(lambda: share[0])
    share[0], clock.now = 0.4, 10.0  # 20 % of the file in 10 s: 30 s for the 60 % left
    progress.update(BatchReport(valid=256))
    assert "256 docs (26/s) · 40% of the input, ~30 s left · " in out.getvalue()
    share[0], clock.now = 1.0, 30.0
    progress.update(BatchReport(valid=256))
    assert "of the input" not in out.getvalue().splitlines()[-1]  # read to the end
    assert "of the input" not in progress.summary()


def test_a_stream_without_a_size_shows_no_share() -> None:
    clock, out = _Clock(), io.StringIO()
    progress = Progress(out, interval_s=1.0, clock=clock)
    progress.follow(lambda: None)
    clock.now = 5.0
    progress.update(BatchReport(valid=10))
    assert out.getvalue() == "noveld: 10 docs (2/s) · 0 active clusters · 0 born · 0 invalid\n"
