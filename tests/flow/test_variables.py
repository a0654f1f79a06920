"""Conversation variables and the Variable Assigner v1/v2 (spec/dify-memory.md §3)."""

from __future__ import annotations

import pytest

from core.flow.errors import AssignerError, TypeMismatchError, VariableError
from core.flow.templates import VariablePool
from core.flow.variables import (
    ConversationVariable,
    edit_variable,
    infer_type,
    initialize,
    run_assigner_v1,
    run_assigner_v2,
    zero_value,
)

DEFAULTS = {
    "string": "hello",
    "number": 10,
    "boolean": True,
    "object": {"k": 1},
    "array[string]": ["a", "b"],
    "array[number]": [1, 2],
    "array[boolean]": [True, False],
    "array[object]": [{"x": 1}],
}
ARRAYS = ["array[string]", "array[number]", "array[boolean]", "array[object]"]
SCALARS = ["string", "number", "boolean", "object"]
# One valid element / list value per array type.
ELEMENT = {"array[string]": "c", "array[number]": 3.5, "array[boolean]": True, "array[object]": {"y": 2}}


def name(t: str) -> str:
    return t.replace("[", "_").replace("]", "")


DECLS = [ConversationVariable(name=name(t), type=t, default=v) for t, v in DEFAULTS.items()]


def values() -> dict:
    return initialize(DECLS, {})


def pool(**outputs) -> VariablePool:
    p = VariablePool(system={"query": "hi"}, conversation=values())
    for node, out in outputs.items():
        p.add_outputs(node, out)
    return p


def v2(items, vals=None, p=None):
    vals = values() if vals is None else vals
    p = p or pool()
    return run_assigner_v2(items, DECLS, vals, p.get)


def item(t, op, input_type, value=None):
    return {"variable_selector": ["conversation", name(t)], "operation": op, "input_type": input_type, "value": value}


# -- types and zero values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t,zero",
    [
        ("string", ""),
        ("number", 0),
        ("integer", 0),
        ("float", 0),
        ("boolean", False),
        ("object", {}),
        ("array[string]", []),
        ("array[number]", []),
        ("array[boolean]", []),
        ("array[object]", []),
    ],
)
def test_clear_writes_the_zero_value_of_each_type(t, zero):
    assert zero_value(t) == zero


def test_dsl_integer_and_float_types_read_as_number():
    v = ConversationVariable.from_dict({"name": "n", "value_type": "integer", "value": 3})
    assert v.type == "number" and v.default == 3
    assert ConversationVariable.from_dict({"name": "f", "value_type": "float", "value": 0.5}).type == "number"


def test_declaration_without_value_or_with_wrong_default_is_rejected():
    with pytest.raises(VariableError, match="missing value"):
        ConversationVariable.from_dict({"name": "x", "value_type": "string", "value": None})
    with pytest.raises(VariableError, match="is not a array\\[number\\]"):
        ConversationVariable.from_dict({"name": "x", "value_type": "array[number]", "value": ["a"]})
    with pytest.raises(VariableError, match="unknown conversation variable type"):
        ConversationVariable.from_dict({"name": "x", "value_type": "array[file]", "value": []})


def test_variables_declared_later_start_at_their_default_and_stored_extras_are_kept():
    got = initialize(DECLS[:1], {"string": "kept", "gone": 5})
    assert got == {"string": "kept", "gone": 5}
    assert initialize(DECLS[:2], {"string": "kept"})["number"] == 10


# -- v2: each operation on each allowed type --------------------------------------------------------


@pytest.mark.parametrize("t", list(DEFAULTS))
def test_v2_over_write_from_a_variable_on_every_type(t):
    new = {
        "string": "new",
        "number": 2.5,
        "boolean": False,
        "object": {"z": 0},
        "array[string]": ["q"],
        "array[number]": [9],
        "array[boolean]": [False],
        "array[object]": [{}],
    }[t]
    result = v2([item(t, "over-write", "variable", ["src", "out"])], p=pool(src={"out": new}))
    assert result.values[name(t)] == new
    assert result.changes == [(name(t), "over-write", DEFAULTS[t], new)]


@pytest.mark.parametrize("t,value", [("string", "typed"), ("number", 7), ("boolean", False), ("object", {"a": 1})])
def test_v2_over_write_and_set_with_a_constant_on_scalars(t, value):
    for op in ("over-write", "set"):
        assert v2([item(t, op, "constant", value)]).values[name(t)] == value


def test_v2_set_on_an_object_parses_a_json_string():
    assert v2([item("object", "set", "constant", '{"b": [1, 2]}')]).values["object"] == {"b": [1, 2]}


@pytest.mark.parametrize("t", list(DEFAULTS))
def test_v2_clear_on_every_type_writes_its_zero_value(t):
    assert v2([item(t, "clear", "variable")]).values[name(t)] == zero_value(t)


@pytest.mark.parametrize(
    "op,value,expected", [("+=", 5, 15), ("-=", 4, 6), ("*=", 3, 30), ("/=", 4, 2.5), ("+=", 0.5, 10.5)]
)
def test_v2_arithmetic_on_a_number(op, value, expected):
    got = v2([item("number", op, "constant", value)]).values["number"]
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("t", ARRAYS)
def test_v2_append_extend_remove_on_every_array_type(t):
    src = pool(src={"el": ELEMENT[t], "list": [ELEMENT[t], ELEMENT[t]]})
    start = DEFAULTS[t]
    assert v2([item(t, "append", "variable", ["src", "el"])], p=src).values[name(t)] == start + [ELEMENT[t]]
    assert v2([item(t, "extend", "variable", ["src", "list"])], p=src).values[name(t)] == start + [ELEMENT[t]] * 2
    assert v2([item(t, "remove-first", "variable")]).values[name(t)] == start[1:]
    assert v2([item(t, "remove-last", "variable")]).values[name(t)] == start[:-1]


def test_v2_remove_on_an_empty_array_leaves_it_empty():
    vals = dict(values(), array_string=[])
    for op in ("remove-first", "remove-last"):
        assert v2([item("array[string]", op, "variable")], vals=vals).values["array_string"] == []


# -- v2: rejected combinations, with Dify's messages ------------------------------------------------


@pytest.mark.parametrize(
    "t,op,message",
    [
        ("array[string]", "set", "Operation set is not supported for type array[string]"),
        ("array[object]", "set", "Operation set is not supported for type array[object]"),
        ("string", "+=", "Operation += is not supported for type string"),
        ("boolean", "-=", "Operation -= is not supported for type boolean"),
        ("object", "*=", "Operation *= is not supported for type object"),
        ("array[number]", "/=", "Operation /= is not supported for type array[number]"),
        ("string", "append", "Operation append is not supported for type string"),
        ("number", "extend", "Operation extend is not supported for type integer"),
        ("boolean", "remove-first", "Operation remove-first is not supported for type boolean"),
        ("object", "remove-last", "Operation remove-last is not supported for type object"),
    ],
)
def test_v2_operation_not_supported_for_the_type(t, op, message):
    kind = "constant" if op in ("set", "+=", "-=", "*=", "/=") else "variable"
    with pytest.raises(AssignerError) as err:
        v2([item(t, op, kind, 1 if kind == "constant" else ["src", "x"])], p=pool(src={"x": 1}))
    assert str(err.value) == message


def test_v2_a_number_created_from_a_float_is_named_float_in_the_message():
    decls = [ConversationVariable(name="f", type="number", default=1.5)]
    append = {
        "variable_selector": ["conversation", "f"],
        "operation": "append",
        "input_type": "variable",
        "value": ["sys", "query"],
    }
    with pytest.raises(AssignerError, match="^Operation append is not supported for type float$"):
        run_assigner_v2([append], decls, {"f": 1.5}, pool().get)


@pytest.mark.parametrize("op", ["set", "+=", "-=", "*=", "/="])
def test_v2_variable_input_rejected_for_set_and_arithmetic(op):
    with pytest.raises(AssignerError) as err:
        v2([item("number", op, "variable", ["src", "x"])], p=pool(src={"x": 1}))
    assert str(err.value) == f"Input type variable is not supported for operation {op}"


@pytest.mark.parametrize(
    "t,op",
    [
        ("string", "clear"),
        ("number", "clear"),
        ("array[string]", "append"),
        ("array[number]", "extend"),
        ("array[object]", "remove-first"),
        ("array[boolean]", "remove-last"),
        ("array[string]", "over-write"),
        ("boolean", "clear"),
    ],
)
def test_v2_constant_input_rejected(t, op):
    with pytest.raises(AssignerError) as err:
        v2([item(t, op, "constant", ["x"])])
    assert str(err.value) == f"Input type constant is not supported for operation {op}"


@pytest.mark.parametrize(
    "t,op,kind,value,shown",
    [
        ("string", "over-write", "constant", 5, "5"),
        ("number", "set", "constant", "x", "x"),
        ("boolean", "set", "constant", "true", "true"),
        ("object", "over-write", "constant", [1], "[1]"),
        ("object", "set", "constant", "{bad json", "{bad json"),
        ("number", "/=", "constant", 0, "0"),
        ("number", "+=", "constant", "1", "1"),
        ("array[string]", "append", "variable", 5, "5"),
        ("array[number]", "append", "variable", "7", "7"),
        ("array[boolean]", "extend", "variable", [1], "[1]"),
        ("array[object]", "extend", "variable", {"a": 1}, "{'a': 1}"),
        ("array[string]", "over-write", "variable", ["a", 1], "['a', 1]"),
    ],
)
def test_v2_invalid_input_value(t, op, kind, value, shown):
    it = item(t, op, kind, value if kind == "constant" else ["src", "v"])
    with pytest.raises(AssignerError) as err:
        v2([it], p=pool(src={"v": value}))
    assert str(err.value) == f"Invalid input value {shown}"


def test_v2_missing_target_and_missing_source_name_the_selector():
    with pytest.raises(AssignerError, match=r"^Variable \['conversation', 'nope'\] not found$"):
        v2([{"variable_selector": ["conversation", "nope"], "operation": "clear", "input_type": "variable"}])
    with pytest.raises(AssignerError, match=r"^Variable \['ghost', 'text'\] not found$"):
        v2([item("string", "over-write", "variable", ["ghost", "text"])])


def test_v2_a_source_from_a_pass_through_node_skips_the_item_silently_for_dify():
    p = pool()
    p.mark_pass_through("code")
    result = v2(
        [item("string", "over-write", "variable", ["code", "result"]), item("number", "+=", "constant", 1)], p=p
    )
    assert result.values["string"] == "hello" and result.values["number"] == 11
    assert [c[0] for c in result.changes] == ["number"]
    assert "left unchanged" in result.notes[0]


def test_v2_items_apply_in_order_each_change_recorded():
    result = v2([item("number", "set", "constant", 1), item("number", "+=", "constant", 2)])
    assert result.values["number"] == 3
    assert result.changes == [("number", "set", 10, 1), ("number", "+=", 1, 3)]


def test_v2_read_after_write_inside_one_node_uses_the_new_value():
    vals = values()
    p = VariablePool(conversation=vals, system={})

    def lookup(selector):  # the runtime's pool, refreshed from the node's working values
        return p.get(selector)

    items = [
        item("string", "set", "constant", "first"),
        item("array[string]", "append", "variable", ["conversation", "string"]),
    ]
    result = run_assigner_v2(items, DECLS, vals, lookup)
    assert result.values["array_string"] == ["a", "b", "first"]


def test_v2_an_error_in_a_later_item_applies_no_update_at_all():
    vals = values()
    before = {k: (list(v) if isinstance(v, list) else v) for k, v in vals.items()}
    with pytest.raises(AssignerError, match="Invalid input value 0"):
        v2(
            [
                item("number", "+=", "constant", 5),
                item("string", "set", "constant", "changed"),
                item("number", "/=", "constant", 0),
            ],
            vals=vals,
        )
    assert vals == before


# -- v1 ---------------------------------------------------------------------------------------------


def v1(mode, target="string", source=("src", "v"), p=None, vals=None):
    data = {
        "assigned_variable_selector": ["conversation", name(target)],
        "write_mode": mode,
        "input_variable_selector": list(source),
    }
    return run_assigner_v1(data, DECLS, vals or values(), (p or pool(src={"v": 42})).get)


def test_v1_over_write_copies_the_value_without_a_type_check():
    result = v1("over-write", "string")
    assert result.values["string"] == 42
    assert result.changes == [("string", "over-write", "hello", 42)]


def test_v1_append_adds_one_element_to_an_array_without_checking_its_type():
    assert v1("append", "array[string]").values["array_string"] == ["a", "b", 42]


def test_v1_append_requires_an_array_variable():
    with pytest.raises(AssignerError, match="^append mode requires an array variable$"):
        v1("append", "string")


def test_v1_clear_writes_the_zero_value_of_the_target_type():
    assert v1("clear", "array[object]").values["array_object"] == []
    assert v1("clear", "number").values["number"] == 0


def test_v1_missing_target_and_missing_source():
    with pytest.raises(AssignerError, match="^assigned variable not found$"):
        run_assigner_v1(
            {"assigned_variable_selector": ["conversation", "nope"], "write_mode": "clear"}, DECLS, values(), pool().get
        )
    with pytest.raises(AssignerError, match="^input value not found$"):
        v1("over-write", source=("ghost", "v"))


# -- live edits from outside the flow ---------------------------------------------------------------


def test_live_edit_with_the_wrong_type_is_rejected_with_difys_message_and_changes_nothing():
    decls = [ConversationVariable(name="x", type="number", default=0)]
    vals = {"x": 3}
    with pytest.raises(TypeMismatchError) as err:
        edit_variable(decls, vals, "x", "five")
    assert str(err.value) == "Type mismatch: variable 'x' expects number, but got string type"
    assert vals == {"x": 3}


@pytest.mark.parametrize("held, expects", [(3, "number"), (2.5, "float"), (None, "number")])
def test_a_live_edit_names_the_segment_the_number_variable_holds_as_dify_does(held, expects):
    """Dify reads the stored variable back as a segment (an int is INTEGER, shown as number; a float FLOAT)
    and names that segment's type."""
    decls = [ConversationVariable(name="x", type="number", default=0)]
    vals = {} if held is None else {"x": held}  # unset: its default, an integer
    with pytest.raises(TypeMismatchError) as err:
        edit_variable(decls, vals, "x", "five")
    assert str(err.value) == f"Type mismatch: variable 'x' expects {expects}, but got string type"


@pytest.mark.parametrize(
    "t,value,got",
    [
        ("string", 5, "integer"),
        ("boolean", "yes", "string"),
        ("array[string]", ["a", 1], "array[any]"),
        ("object", None, "none"),
        ("array[number]", [True, "x"], "array[any]"),
    ],
)
def test_live_edit_mismatch_names_the_inferred_type(t, value, got):
    with pytest.raises(TypeMismatchError) as err:
        edit_variable(DECLS, values(), name(t), value)
    assert str(err.value) == f"Type mismatch: variable '{name(t)}' expects {t}, but got {got} type"


def test_live_edit_of_the_right_type_is_recorded_as_a_user_edit():
    vals = values()
    new, change = edit_variable(DECLS, vals, "number", 2.5, turn=4, turn_id="t4")
    assert new["number"] == 2.5 and vals["number"] == 10
    assert (change.node_id, change.operation, change.old, change.new, change.turn) == ("user", "edit", 10, 2.5, 4)
    assert change.by_user


def test_live_edit_of_an_unknown_variable_names_the_declared_ones():
    with pytest.raises(VariableError, match="does not exist; the flow declares"):
        edit_variable(DECLS, values(), "nope", 1)


def test_inferred_types():
    assert [infer_type(v) for v in ("s", 1, 1.5, True, {}, ["a"], [1, 2.0], [], None)] == [
        "string",
        "integer",
        "float",
        "boolean",
        "object",
        "array[string]",
        "array[number]",
        "array[number]",
        "none",
    ]


# -- Dify 1.x as shipped: the small divergences ------------------------------------------------------


def test_v1_over_write_from_a_source_that_resolves_to_nothing_writes_null():
    p = pool(src={"v": None})
    result = v1("over-write", "string", p=p)
    assert result.values["string"] is None
    assert result.changes == [("string", "over-write", "hello", None)]
    passed = pool()
    passed.add_outputs("code", {})
    passed.mark_pass_through("code")
    result = v1("over-write", "number", source=("code", "result"), p=passed)
    assert result.values["number"] is None and "is now null" in result.notes[0]


def test_an_integer_variable_stays_integer_in_error_messages_after_arithmetic():
    vals = v2([item("number", "/=", "constant", 4)]).values
    assert vals["number"] == 2.5  # 10 / 4: a float value…
    with pytest.raises(AssignerError, match="^Operation append is not supported for type integer$"):
        v2([item("number", "append", "variable", ["src", "v"])], vals=vals, p=pool(src={"v": 1}))


@pytest.mark.parametrize(
    "value, inferred",
    [
        (5, "integer"),
        (2.5, "float"),
        ([], "array[number]"),
        ([1, 2.5], "array[number]"),
        (["a"], "array[string]"),
        ([1, "a"], "array[any]"),
        (True, "boolean"),
        (None, "none"),
    ],
)
def test_live_edit_mismatch_uses_difys_inferred_type_names(value, inferred):
    decls = [ConversationVariable(name="x", type="string", default="")]
    with pytest.raises(TypeMismatchError) as err:
        edit_variable(decls, {"x": ""}, "x", value)
    assert str(err.value) == f"Type mismatch: variable 'x' expects string, but got {inferred} type"


def test_a_list_of_plain_values_has_the_size_of_the_list_read_back_from_its_json():
    import json
    import sys

    from core.flow.variables import variable_size

    kinds = ["label", 7, 2.5, True, None, "é", 10**30]
    for n in [*range(0, 300), 999, 1000, 1001, 2000, 2001, 4096, 20_000]:
        value = [kinds[i % len(kinds)] for i in range(n)]
        assert variable_size(value) == sys.getsizeof(json.loads(json.dumps(value))), n
    # Lists holding lists or objects, and tuples, are still measured by writing and reading them.
    for value in ([[1, 2], {"a": 1}], [("x", 1)], ("x", "y")):
        assert variable_size(value) == sys.getsizeof(json.loads(json.dumps(value)))


def test_variable_size_is_difys_shallow_size_of_the_loaded_value():
    import json
    import sys
    from bisect import bisect_left

    from core.flow.variables import MAX_VARIABLE_SIZE, check_sizes, variable_size

    small = ["x"] * 100
    assert variable_size(small) == sys.getsizeof(json.loads(json.dumps(small)))
    assert check_sizes({"log": small}) is None
    # The shortest list of zeros over the limit (its loaded size only grows with its length).
    sizes = range(20_000, 30_000)
    n = sizes[
        bisect_left(sizes, True, key=lambda k: sys.getsizeof(json.loads(json.dumps([0] * k))) > MAX_VARIABLE_SIZE)
    ]
    big = [0] * n
    assert check_sizes({"log": big}) == f"variable size {variable_size(big)} exceeds limit 204800"
    assert check_sizes({"log": [0] * (n - 1)}) is None


def test_a_declaration_or_an_assigner_of_the_wrong_shape_is_refused_and_a_malformed_selector_names_nothing():
    from core.flow.templates import MISSING
    from core.flow.variables import check_assigner_data

    with pytest.raises(VariableError, match="conversation variable 'x': 'description' must be text"):
        ConversationVariable.from_dict({"name": "x", "value_type": "string", "value": "", "description": 2.5})
    for key in ("assigned_variable_selector", "input_variable_selector"):
        with pytest.raises(VariableError, match=f"'{key}' must be a list, e.g. \\[conversation, name\\]"):
            check_assigner_data({"write_mode": "over-write", key: True})
    with pytest.raises(VariableError, match="unknown assigner write_mode \\['clear'\\]"):
        check_assigner_data({"write_mode": ["clear"]})
    assert check_assigner_data({"write_mode": "clear", "assigned_variable_selector": ["conversation", "x"]}) == "1"
    pool = VariablePool(system={"query": "hi"}, conversation={"x": 1})
    assert pool.get(["sys", "query"]) == "hi"
    for selector in (True, ["sys", ["query"]], ["conversation"], ("conversation", {"x": 1})):
        assert pool.get(selector) is MISSING
    with pytest.raises(AssignerError, match="assigned variable not found"):
        run_assigner_v1(
            {"assigned_variable_selector": ["conversation", ["x"]], "input_variable_selector": ["sys", "query"]},
            [],
            {"x": 1},
            pool.get,
        )


def test_an_assigner_whose_result_is_not_a_finite_number_fails_and_writes_nothing():
    """1e308 *= 10 is inf in Python (and Dify): no JSON carries it, so the node fails, in one line."""
    from core.flow.graph import Flow
    from core.flow.records import ConversationState
    from core.flow.runtime import run_turn
    from core.llm.client import DemoClient

    flow = Flow.from_dict(
        {
            "format": "memlens-flow",
            "version": 1,
            "name": "grow",
            "variables": [{"name": "n", "type": "number", "default": 1e308}],
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "grow",
                    "type": "assigner",
                    "version": "2",
                    "items": [
                        {
                            "variable_selector": ["conversation", "n"],
                            "operation": "*=",
                            "input_type": "constant",
                            "value": 10,
                        }
                    ],
                },
                {"id": "answer", "type": "answer", "answer": "{{#conversation.n#}}"},
            ],
            "edges": [["start", "grow"], ["grow", "answer"]],
        }
    )
    state = ConversationState.new(flow)
    record = run_turn(flow, state, "hi", llm=DemoClient())
    assert record.status == "failed" and record.variable_changes == []
    assert record.error == ("conversation.n holds inf, which is not a number JSON can carry; nothing was written")
