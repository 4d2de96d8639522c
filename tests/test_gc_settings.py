"""The collector settings a run changes (evalnb._gc) come back exactly as they were."""

import gc
import threading

from evalnb._gc import RUN_GEN0_THRESHOLD, fewer_collections, gc_paused


def test_fewer_collections_freezes_and_restores():
    before = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    with fewer_collections():
        assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > frozen_before  # the heap that existed is skipped
        with fewer_collections():  # a second run in the same process (another thread, say)
            assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD
        assert gc.get_threshold()[0] >= RUN_GEN0_THRESHOLD  # the outer run still holds it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_fewer_collections_restores_after_an_error():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_during_a_run_are_still_collected():
    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = [gc.get_referrers]  # noqa: F841 - keep something else allocated
        del a, b
        assert gc.collect() >= 2  # an explicit collection still finds the cycle


def test_gc_paused_overlapping_threads_reenable_only_at_the_end():
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def hold():
        with gc_paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(5)
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_gc_paused_keeps_a_disabled_collector_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
