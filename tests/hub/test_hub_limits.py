"""The limits make hub gives each learner (classroom/hub/cgroups.py, classroom/hub/'s options): what it chooses for a
machine, and a bad value named with its option and rule. The limits held by a real hub: tests/hub/test_hub.py."""

from __future__ import annotations

import argparse

import pytest

from classroom.hub.cgroups import Limits, default_limits, parse_size
from classroom.hub.command import limits_from
from classroom.hub.layout import HubError

GIB = 2**30


def test_sizes_read_as_an_instructor_writes_them():
    assert parse_size("2G", "HUB_MEMORY") == 2 * GIB
    assert parse_size("1.5GiB", "HUB_MEMORY") == 3 * GIB // 2
    assert parse_size("512M", "HUB_MEMORY") == 512 * 2**20
    assert parse_size("1073741824", "HUB_MEMORY") == GIB
    with pytest.raises(ValueError, match=r"HUB_MEMORY='two gigs' is not a size: write it as 2G"):
        parse_size("two gigs", "HUB_MEMORY")


def test_a_24_gib_machine_gives_each_learner_2_gib_and_the_class_16():
    limits = default_limits(24 * GIB)
    assert (limits.memory, limits.cpus, limits.tasks) == (2 * GIB, 1.0, 512)
    assert (limits.class_memory, limits.instructor_memory) == (16 * GIB, 6 * GIB)


@pytest.mark.parametrize("total_gib", [4, 8, 16, 64, 256])
def test_every_machine_keeps_room_for_the_instructor_and_the_system(total_gib):
    limits = default_limits(total_gib * GIB)
    assert limits.class_memory + limits.instructor_memory < total_gib * GIB
    assert limits.memory <= limits.class_memory


def test_a_limit_too_small_to_run_a_kernel_is_refused_with_its_value():
    with pytest.raises(ValueError, match=r"memory = 1,048,576 bytes is below 256 MiB"):
        Limits(memory=2**20, cpus=1, tasks=512, class_memory=8 * GIB, instructor_memory=4 * GIB)
    with pytest.raises(ValueError, match=r"tasks = 10 is below 64"):
        Limits(memory=GIB, cpus=1, tasks=10, class_memory=8 * GIB, instructor_memory=4 * GIB)


def test_make_hub_options_override_the_machines_defaults_one_by_one():
    args = argparse.Namespace(limits="", memory="1536M", cpus="0.5", tasks="", class_memory="", instructor_memory="")
    chosen = limits_from(args)
    assert (chosen.memory, chosen.cpus, chosen.tasks) == (1536 * 2**20, 0.5, default_limits().tasks)
    args.limits = "none"
    assert limits_from(args) is None
    args.limits, args.memory = "", "lots"
    with pytest.raises(HubError, match=r"HUB_MEMORY='lots' is not a size"):
        limits_from(args)


# --- each learner's disk (classroom/hub/disks.py): what make hub chooses, and a bad size named

from classroom.hub.disks import RESERVE, DiskSizes, default_sizes, sizes_from  # noqa: E402


def test_a_machine_with_72_gib_free_gives_each_of_30_learners_1_gib_and_the_exchange_8():
    sizes = default_sizes(free=72 * GIB)
    assert (sizes.home, sizes.exchange) == (GIB, 8 * GIB)
    assert 30 * sizes.home + sizes.exchange + RESERVE <= 72 * GIB


@pytest.mark.parametrize("free_gib", [12, 20, 40, 500])
def test_every_disk_keeps_the_reserve_for_a_class_of_30(free_gib):
    sizes = default_sizes(free=free_gib * GIB)
    assert 30 * sizes.home + sizes.exchange <= max(0, free_gib * GIB - RESERVE) or sizes.home == 64 * 2**20


def test_disk_sizes_read_as_make_hub_writes_them():
    sizes = sizes_from("512M", "4G")
    assert (sizes.home, sizes.exchange) == (512 * 2**20, 4 * GIB)
    with pytest.raises(HubError, match=r"HUB_DISK='a lot' is not a size"):
        sizes_from("a lot", "")
    with pytest.raises(ValueError, match=r"home disk = 1,048,576 bytes is below 64 MiB"):
        DiskSizes(home=2**20, exchange=GIB)
