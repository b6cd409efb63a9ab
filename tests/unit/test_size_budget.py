"""The sweeps' time box (suite/costmodel/size_budget.py): the next size predicted from the one before it, the
time left shared among the series still to run, and a sweep that stops growing once a size is dropped."""

from suite.costmodel.size_budget import SizeBudget, size_text


def test_no_limit_runs_every_size():
    box = SizeBudget(total_s=None, series=["all_reduce"])
    for size in (8, 1 << 20, 1 << 33):
        assert box.before("all_reduce", size) is None
        box.after("all_reduce", size, wall_s=100.0, elapsed_s=1e6)


def test_the_next_size_is_predicted_from_the_last_two():
    box = SizeBudget(total_s=10.0, series=["all_reduce"])
    assert box.before("all_reduce", 1 << 20) is None  # the first two sizes: nothing to draw a line through
    box.after("all_reduce", 1 << 20, wall_s=1.0, elapsed_s=2.0)
    assert box.before("all_reduce", 1 << 21) is None
    box.after("all_reduce", 1 << 21, wall_s=2.0, elapsed_s=4.0)
    assert box.before("all_reduce", 1 << 22) is None  # 4 s on the line (1 s per MiB): 8 s by then, within 10
    why = box.before("all_reduce", 1 << 23)  # 8 s predicted, 12 s by then: past 10
    assert why is not None and "≈8.0 s" in why and "2 MiB took 2.00 s" in why and "6.0 s left" in why
    assert "stopped growing at 2 MiB" in why
    # stopping: a larger size is dropped with the same reason, even one a fresh prediction would allow
    box.after("all_reduce", 1 << 21, wall_s=1e-6, elapsed_s=4.0)
    assert box.before("all_reduce", 1 << 24) == why


def test_series_share_the_time_left_and_pass_on_what_they_leave():
    box = SizeBudget(total_s=30.0, series=["a", "b", "c"])
    assert box.before("a", 8) is None  # a's share: 30 s / 3 series = until 10 s
    box.after("a", 8, wall_s=1.0, elapsed_s=1.0)
    assert box.before("a", 64) is None
    box.after("a", 64, wall_s=8.0, elapsed_s=9.0)
    assert "1.0 s left to a" in box.before("a", 512)  # 64 s on the line: a stops, 1 s of its share unused
    assert box.before("b", 8) is None  # b's share: what is left, 21 s, over b and c: until 19.5 s
    box.after("b", 8, wall_s=0.25, elapsed_s=9.25)
    box.after("b", 64, wall_s=0.25 + 56 / 64, elapsed_s=10.5)  # 1/64 s per byte
    assert box.before("b", 512) is None  # 8.125 s on the line: 18.6 s by then, within 19.5
    box.after("b", 512, wall_s=8.125, elapsed_s=18.625)
    assert "0.9 s left to b" in box.before("b", 4096)  # 64 s on the line
    box.elapsed_s = 11.0  # say b had ended at 11 s instead: c's share is all the rest
    assert box.before("c", 8) is None  # c: everything left, until 30 s
    assert box._end["c"] == 30.0
    box.after("c", 8, wall_s=1.0, elapsed_s=12.0)
    box.after("c", 64, wall_s=1.0, elapsed_s=13.0)
    assert box.before("c", 1 << 20) is None  # latency-bound: the line is flat


def test_size_text():
    assert [size_text(b) for b in (8, 4096, 3 << 20, 8 << 30)] == ["8 B", "4 KiB", "3 MiB", "8 GiB"]


def test_the_line_through_the_last_two_sizes_predicts_latency_bound_ones():
    box = SizeBudget(total_s=1.0, series=["broadcast"])
    box.before("broadcast", 8)
    box.after("broadcast", 8, wall_s=0.2, elapsed_s=0.2)  # the first call's set-up
    box.after("broadcast", 64, wall_s=0.004, elapsed_s=0.21)
    assert box.predict("broadcast", 512) == 0.004  # the line falls: never below the last size's time
    box.after("broadcast", 512, wall_s=0.005, elapsed_s=0.22)
    assert abs(box.predict("broadcast", 4096) - (0.005 + 0.001 / 448 * 3584)) < 1e-12  # α + β·bytes
    assert box.before("broadcast", 4096) is None
