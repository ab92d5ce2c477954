from nettop.model.counters import U32, U64, Step, delta, rate


def test_plain_increase():
    assert delta(100, 250) == (150, Step.OK)


def test_u32_counter_wrap_is_counted_across_the_top():
    assert delta(U32 - 10, 5, U32) == (15, Step.WRAPPED)


def test_backwards_far_from_the_top_is_a_reset_and_counts_the_new_value():
    # a driver reload restarts counters from zero: traffic since then is the new value
    assert delta(5_000_000, 1_200, U32) == (1_200, Step.RESET)
    assert delta(10**12, 7, U64) == (7, Step.RESET)


def test_rate_uses_given_elapsed_and_unknowns_are_none():
    assert rate(0, 300, 1.5) == 200
    assert rate(None, 3, 1.0) is None
    assert rate(1, 3, 0.0) is None
