"""EventBridge event-pattern matching and PutRule validation (``emulator.event_patterns``), no AWS needed.

Cases marked with a page name come from the EventBridge user guide's examples:
  operators   https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-create-pattern-operators.html
  filtering   https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-filtering.html
  arrays      https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-arrays.html
  null-values https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-null-values.html
  patterns    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html
Cases marked "ruler" follow https://github.com/aws/event-ruler (README.md, JsonRuleCompiler.java), which
the module follows where the guide is silent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.event_patterns import (
    MAX_OR_COMBINATIONS,
    InvalidPattern,
    compile_pattern,
    pattern_matches,
    validate_pattern,
)

Case = tuple[str, dict[str, Any], dict[str, Any], bool]

EC2_EVENT = {  # patterns: the EC2 state-change example event
    "version": "0",
    "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "111122223333",
    "time": "2017-12-22T18:43:48Z",
    "region": "us-west-1",
    "resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "state": "terminated"},
}


def detail(**fields: Any) -> dict[str, Any]:
    return {"source": "test", "detail": fields}


BASICS: list[Case] = [
    (
        "patterns: the EC2 termination pattern",
        {
            "source": ["aws.ec2"],
            "detail-type": ["EC2 Instance State-change Notification"],
            "detail": {"state": ["terminated"]},
        },
        EC2_EVENT,
        True,
    ),
    (
        "every field must match (AND)",
        {"source": ["aws.ec2"], "detail": {"state": ["running"]}},
        EC2_EVENT,
        False,
    ),
    ("a list is alternatives (OR)", {"source": ["aws.ec2", "aws.fargate"]}, EC2_EVENT, True),
    ("no alternative matches", {"source": ["aws.fargate", "aws.s3"]}, EC2_EVENT, False),
    ("strings are case-sensitive", {"source": ["AWS.EC2"]}, EC2_EVENT, False),
    ("no partial string match", {"source": ["aws"]}, EC2_EVENT, False),
    ("a field the event lacks never matches a value", {"detail": {"size": ["terminated"]}}, EC2_EVENT, False),
    ("a pattern object needs an event object", {"source": {"name": ["aws.ec2"]}}, EC2_EVENT, False),
    ("nested objects descend", {"detail": {"instance-id": ["i-1234567890abcdef0"]}}, EC2_EVENT, True),
    ("deep nesting", {"detail": {"a": {"b": {"c": [1]}}}}, detail(a={"b": {"c": 1}}), True),
    ("deep nesting, wrong value", {"detail": {"a": {"b": {"c": [1]}}}}, detail(a={"b": {"c": 2}}), False),
    ("null-values: empty string", {"detail": {"eventVersion": [""]}}, detail(eventVersion=""), True),
    ("null-values: null", {"detail": {"responseElements": [None]}}, detail(responseElements=None), True),
    ("null-values: empty string does not match null", {"detail": {"v": [""]}}, detail(v=None), False),
    ("null-values: null does not match empty string", {"detail": {"v": [None]}}, detail(v=""), False),
    ("null does not match an absent field", {"detail": {"v": [None]}}, detail(), False),
    ("numbers compare numerically: 5 is 5.0", {"detail": {"n": [5]}}, detail(n=5.0), True),
    ("numbers compare numerically: 3.0e2 is 300", {"detail": {"n": [3.0e2]}}, detail(n=300), True),
    ("different numbers", {"detail": {"n": [5]}}, detail(n=5.5), False),
    ('the string "5" is not the number 5', {"detail": {"n": ["5"]}}, detail(n=5), False),
    ('the number 5 is not the string "5"', {"detail": {"n": [5]}}, detail(n="5"), False),
    ("true is a boolean", {"detail": {"b": [True]}}, detail(b=True), True),
    ("true is not the number 1", {"detail": {"b": [True]}}, detail(b=1), False),
    ("the number 1 is not true", {"detail": {"b": [1]}}, detail(b=True), False),
    ("false is not null", {"detail": {"b": [False]}}, detail(b=None), False),
]

ARRAYS: list[Case] = [
    (
        "arrays: a shared element is enough",
        {
            "resources": [
                "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f",
                "arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f",
            ]
        },
        {
            "resources": [
                "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:eb56d16b",
                "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f",
            ]
        },
        True,
    ),
    ("arrays: no shared element", {"resources": ["a", "b"]}, {"resources": ["c", "d"]}, False),
    ("an empty event array matches no value", {"resources": ["a"]}, {"resources": []}, False),
    (
        "any element may match an operator",
        {"tags": [{"prefix": "env:"}]},
        {"tags": ["team:x", "env:dev"]},
        True,
    ),
    ("no element matches the operator", {"tags": [{"prefix": "env:"}]}, {"tags": ["team:x"]}, False),
    ("nested arrays are flattened", {"n": [3]}, {"n": [[1, 2], [3]]}, True),
    (
        "arrays of objects: descend into each element",
        {"items": {"sku": ["B"]}},
        {"items": [{"sku": "A"}, {"sku": "B"}]},
        True,
    ),
    (
        "arrays of objects: no element has the value",
        {"items": {"sku": ["C"]}},
        {"items": [{"sku": "A"}, {"sku": "B"}]},
        False,
    ),
    (
        "ruler: two fields must match within one element",
        {"employees": {"firstName": ["Anna"], "lastName": ["Smith"]}},
        {"employees": [{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}]},
        True,
    ),
    (
        "ruler: fields split across elements do not match",
        {"employees": {"firstName": ["Anna"], "lastName": ["Doe"]}},
        {"employees": [{"firstName": "John", "lastName": "Doe"}, {"firstName": "Anna", "lastName": "Smith"}]},
        False,
    ),
    (
        "ruler: arrays of arrays of objects",
        {"employees": {"firstName": ["Peter"]}},
        {"employees": [[{"firstName": "John"}], [{"firstName": "Peter"}]]},
        True,
    ),
    (
        "ruler: a value list does not match an array of objects",
        {"employees": ["b"]},
        {"employees": [{"firstName": "b"}]},
        False,
    ),
]

PREFIX_SUFFIX_IGNORE_CASE: list[Case] = [
    ("filtering: prefix", {"time": [{"prefix": "2017-10-02"}]}, {"time": "2017-10-02T18:43:48Z"}, True),
    (
        "filtering: prefix, other value",
        {"time": [{"prefix": "2017-10-02"}]},
        {"time": "2017-10-03T00:00:00Z"},
        False,
    ),
    ("prefix is case-sensitive", {"region": [{"prefix": "us-"}]}, {"region": "US-east-1"}, False),
    ("prefix only matches strings", {"n": [{"prefix": "1"}]}, {"n": 12}, False),
    (
        "filtering: prefix equals-ignore-case",
        {"detail": {"service": [{"prefix": {"equals-ignore-case": "EventB"}}]}},
        detail(service="EVENTBRIDGE"),
        True,
    ),
    (
        "prefix equals-ignore-case, other value",
        {"detail": {"service": [{"prefix": {"equals-ignore-case": "EventB"}}]}},
        detail(service="SNS"),
        False,
    ),
    ("filtering: suffix", {"FileName": [{"suffix": ".png"}]}, {"FileName": "image.png"}, True),
    ("suffix, other extension", {"FileName": [{"suffix": ".png"}]}, {"FileName": "image.jpg"}, False),
    ("suffix is case-sensitive", {"FileName": [{"suffix": ".png"}]}, {"FileName": "image.PNG"}, False),
    (
        "filtering: suffix equals-ignore-case",
        {"detail": {"FileName": [{"suffix": {"equals-ignore-case": ".png"}}]}},
        detail(FileName="IMAGE.PNG"),
        True,
    ),
    (
        "suffix equals-ignore-case, other value",
        {"detail": {"FileName": [{"suffix": {"equals-ignore-case": ".png"}}]}},
        detail(FileName="a.png.gz"),
        False,
    ),
    (
        "filtering: equals-ignore-case",
        {"detail-type": [{"equals-ignore-case": "ec2 instance state-change notification"}]},
        EC2_EVENT,
        True,
    ),
    (
        "equals-ignore-case is not a prefix match",
        {"detail-type": [{"equals-ignore-case": "ec2 instance"}]},
        EC2_EVENT,
        False,
    ),
    ("equals-ignore-case only matches strings", {"n": [{"equals-ignore-case": "5"}]}, {"n": 5}, False),
]

ANYTHING_BUT: list[Case] = [
    (
        "filtering: anything-but a string",
        {"detail": {"state": [{"anything-but": "initializing"}]}},
        detail(state="running"),
        True,
    ),
    (
        "anything-but excludes that string",
        {"detail": {"state": [{"anything-but": "initializing"}]}},
        detail(state="initializing"),
        False,
    ),
    (
        "filtering: anything-but a number",
        {"detail": {"x-limit": [{"anything-but": 123}]}},
        detail(**{"x-limit": 124}),
        True,
    ),
    (
        "anything-but excludes that number, 123.0 too",
        {"detail": {"x-limit": [{"anything-but": 123}]}},
        detail(**{"x-limit": 123.0}),
        False,
    ),
    (
        "filtering: anything-but a list of strings",
        {"detail": {"state": [{"anything-but": ["stopped", "overloaded"]}]}},
        detail(state="running"),
        True,
    ),
    (
        "anything-but list excludes each string",
        {"detail": {"state": [{"anything-but": ["stopped", "overloaded"]}]}},
        detail(state="overloaded"),
        False,
    ),
    (
        "filtering: anything-but a list of numbers",
        {"detail": {"x-limit": [{"anything-but": [100, 200, 300]}]}},
        detail(**{"x-limit": 250}),
        True,
    ),
    (
        "anything-but list excludes each number",
        {"detail": {"x-limit": [{"anything-but": [100, 200, 300]}]}},
        detail(**{"x-limit": 200}),
        False,
    ),
    (
        "anything-but does not match a missing field",
        {"detail": {"state": [{"anything-but": "initializing"}]}},
        detail(),
        False,
    ),
    (
        "anything-but does not match an object (not a leaf)",
        {"detail": {"state": [{"anything-but": "x"}]}},
        detail(state={"a": 1}),
        False,
    ),
    (
        "anything-but matches another type",
        {"detail": {"state": [{"anything-but": "5"}]}},
        detail(state=5),
        True,
    ),
    (
        "anything-but matches if any array element is not excluded",
        {"price": [{"anything-but": [100, 500]}]},
        {"price": [100, 50]},
        True,
    ),
    (
        "anything-but fails if every array element is excluded",
        {"price": [{"anything-but": [100, 500]}]},
        {"price": [100, 500]},
        False,
    ),
    (
        "filtering: anything-but prefix",
        {"detail": {"state": [{"anything-but": {"prefix": "init"}}]}},
        detail(state="running"),
        True,
    ),
    (
        "anything-but prefix excludes the prefix",
        {"detail": {"state": [{"anything-but": {"prefix": "init"}}]}},
        detail(state="initializing"),
        False,
    ),
    (
        "ruler: anything-but a list of prefixes",
        {"state": [{"anything-but": {"prefix": ["init", "error"]}}]},
        {"state": "error-42"},
        False,
    ),
    (
        "operators: anything-but suffix",
        {"FileName": [{"anything-but": {"suffix": ".png"}}]},
        {"FileName": "a.jpg"},
        True,
    ),
    (
        "anything-but suffix excludes the suffix",
        {"FileName": [{"anything-but": {"suffix": ".png"}}]},
        {"FileName": "a.png"},
        False,
    ),
    (
        "operators: anything-but equals-ignore-case",
        {"state": [{"anything-but": {"equals-ignore-case": "initializing"}}]},
        {"state": "running"},
        True,
    ),
    (
        "anything-but equals-ignore-case excludes any casing",
        {"state": [{"anything-but": {"equals-ignore-case": ["stopped", "initializing"]}}]},
        {"state": "INITIALIZING"},
        False,
    ),
    (
        "operators: anything-but wildcard",
        {"FilePath": [{"anything-but": {"wildcard": "*/lib/*"}}]},
        {"FilePath": "/usr/bin/tool"},
        True,
    ),
    (
        "anything-but wildcard excludes matching paths",
        {"FilePath": [{"anything-but": {"wildcard": "*/lib/*"}}]},
        {"FilePath": "/usr/lib/libc.so"},
        False,
    ),
    (
        "anything-but prefix matches a non-string (it is not such a string)",
        {"state": [{"anything-but": {"prefix": "init"}}]},
        {"state": 7},
        True,
    ),
    (
        "anything-but prefix does not match a missing field",
        {"state": [{"anything-but": {"prefix": "init"}}]},
        {"other": 1},
        False,
    ),
]

NUMERIC: list[Case] = [
    (
        "filtering: > 0 and <= 5, inside",
        {"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}},
        detail(**{"c-count": 5}),
        True,
    ),
    (
        "> 0 and <= 5, the open bottom",
        {"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}},
        detail(**{"c-count": 0}),
        False,
    ),
    (
        "> 0 and <= 5, above",
        {"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}},
        detail(**{"c-count": 5.000001}),
        False,
    ),
    ("filtering: < 10", {"detail": {"d-count": [{"numeric": ["<", 10]}]}}, detail(**{"d-count": 9.5}), True),
    ("< 10 at 10", {"detail": {"d-count": [{"numeric": ["<", 10]}]}}, detail(**{"d-count": 10}), False),
    ("<= 10 at 10", {"n": [{"numeric": ["<=", 10]}]}, {"n": 10}, True),
    ("<= 10 above", {"n": [{"numeric": ["<=", 10]}]}, {"n": 10.5}, False),
    ("> 10 above", {"n": [{"numeric": [">", 10]}]}, {"n": 11}, True),
    ("> 10 at 10", {"n": [{"numeric": [">", 10]}]}, {"n": 10}, False),
    (">= 10 at 10", {"n": [{"numeric": [">=", 10]}]}, {"n": 10.0}, True),
    (">= 10 below", {"n": [{"numeric": [">=", 10]}]}, {"n": 9.999}, False),
    (
        "filtering: = 3.018e2",
        {"detail": {"x-limit": [{"numeric": ["=", 3.018e2]}]}},
        detail(**{"x-limit": 301.8}),
        True,
    ),
    (
        "= 3.018e2, other number",
        {"detail": {"x-limit": [{"numeric": ["=", 3.018e2]}]}},
        detail(**{"x-limit": 301}),
        False,
    ),
    (
        "operators: = 100 with an integer operand and a float value",
        {"Price": [{"numeric": ["=", 100]}]},
        {"Price": 100.0},
        True,
    ),
    ("operators: > 10 and <= 20", {"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 20}, True),
    (">= 10 and < 20 at 20", {"Price": [{"numeric": [">=", 10, "<", 20]}]}, {"Price": 20}, False),
    (">= 10 and < 20 at 10", {"Price": [{"numeric": [">=", 10, "<", 20]}]}, {"Price": 10}, True),
    ('numeric never matches the string "5"', {"n": [{"numeric": ["=", 5]}]}, {"n": "5"}, False),
    (
        'numeric range never matches the string "5"',
        {"n": [{"numeric": [">", 0, "<", 10]}]},
        {"n": "5"},
        False,
    ),
    ("numeric never matches true", {"n": [{"numeric": [">", 0]}]}, {"n": True}, False),
    ("numeric never matches null", {"n": [{"numeric": [">", 0]}]}, {"n": None}, False),
    ("numeric does not match a missing field", {"n": [{"numeric": ["<", 10]}]}, {}, False),
    ("numeric on an array: any element", {"n": [{"numeric": [">", 100]}]}, {"n": [1, 101]}, True),
    ("numeric and a value are alternatives", {"n": [{"numeric": [">", 100]}, 7]}, {"n": 7}, True),
]

EXISTS: list[Case] = [
    ("filtering: exists true, present", {"detail": {"state": [{"exists": True}]}}, EC2_EVENT, True),
    (
        "filtering: exists true, absent",
        {"detail": {"state": [{"exists": True}]}},
        {"detail": {"c-count": {"c1": 100}}},
        False,
    ),
    ("filtering: exists false, absent", {"detail": {"c-count": [{"exists": False}]}}, EC2_EVENT, True),
    ("exists false, present", {"detail": {"c-count": [{"exists": False}]}}, detail(**{"c-count": 3}), False),
    (
        "filtering: exists false matches a non-leaf (object) field",
        {"detail": {"c-count": [{"exists": False}]}},
        {"detail": {"state": ["initializing", "running"], "c-count": {"c1": 100}}},
        True,
    ),
    (
        "exists true does not match a non-leaf (object) field",
        {"detail": {"c-count": [{"exists": True}]}},
        {"detail": {"c-count": {"c1": 100}}},
        False,
    ),
    ("exists true matches a present null", {"detail": {"v": [{"exists": True}]}}, detail(v=None), True),
    (
        "exists false does not match a present null",
        {"detail": {"v": [{"exists": False}]}},
        detail(v=None),
        False,
    ),
    ("exists true matches an empty string", {"v": [{"exists": True}]}, {"v": ""}, True),
    ("exists true matches a non-empty array", {"v": [{"exists": True}]}, {"v": [1]}, True),
    ("exists true does not match an empty array (no leaf)", {"v": [{"exists": True}]}, {"v": []}, False),
    ("exists false matches an empty array (no leaf)", {"v": [{"exists": False}]}, {"v": []}, True),
    (
        "exists false when the parent object is missing",
        {"detail": {"v": [{"exists": False}]}},
        {"source": "x"},
        True,
    ),
    (
        "exists true when the parent object is missing",
        {"detail": {"v": [{"exists": True}]}},
        {"source": "x"},
        False,
    ),
    (
        "ruler: exists false under an array: one element lacks the field",
        {"employees": {"firstName": ["Anna"], "ids": [{"exists": False}]}},
        {"employees": [{"firstName": "John", "ids": [1]}, {"firstName": "Anna"}]},
        True,
    ),
    (
        "ruler: exists true under an array, in the same element",
        {"employees": {"firstName": ["Anna"], "ids": [{"exists": True}]}},
        {"employees": [{"firstName": "John", "ids": [1]}, {"firstName": "Anna"}]},
        False,
    ),
    (
        "ruler: anything-but or exists false, absent",
        {"tier": [{"anything-but": ["gold", "silver"]}, {"exists": False}]},
        {"other": 1},
        True,
    ),
    (
        "ruler: anything-but or exists false, excluded value",
        {"tier": [{"anything-but": ["gold", "silver"]}, {"exists": False}]},
        {"tier": "gold"},
        False,
    ),
]

CIDR: list[Case] = [
    (
        "filtering: IPv4 in 10.0.0.0/24",
        {"detail": {"sourceIPAddress": [{"cidr": "10.0.0.0/24"}]}},
        detail(sourceIPAddress="10.0.0.255"),
        True,
    ),
    (
        "IPv4 outside 10.0.0.0/24",
        {"detail": {"sourceIPAddress": [{"cidr": "10.0.0.0/24"}]}},
        detail(sourceIPAddress="10.0.1.0"),
        False,
    ),
    ("host bits in the CIDR are masked off", {"ip": [{"cidr": "10.0.0.7/24"}]}, {"ip": "10.0.0.200"}, True),
    ("IPv6 in 2001:db8::/32", {"ip": [{"cidr": "2001:db8::/32"}]}, {"ip": "2001:db8:1234::1"}, True),
    ("IPv6 outside 2001:db8::/32", {"ip": [{"cidr": "2001:db8::/32"}]}, {"ip": "2001:db9::1"}, False),
    ("an IPv4 address is not in an IPv6 block", {"ip": [{"cidr": "::/0"}]}, {"ip": "10.0.0.1"}, False),
    ("a non-address string never matches", {"ip": [{"cidr": "10.0.0.0/8"}]}, {"ip": "not-an-ip"}, False),
    ("a number never matches cidr", {"ip": [{"cidr": "0.0.0.0/0"}]}, {"ip": 167772161}, False),
]

WILDCARD: list[Case] = [
    (
        "operators: a .png file in dir",
        {"FileName": [{"wildcard": "dir/*.png"}]},
        {"FileName": "dir/a/b.png"},
        True,
    ),
    (
        "wildcard: another folder",
        {"FileName": [{"wildcard": "dir/*.png"}]},
        {"FileName": "other/b.png"},
        False,
    ),
    (
        "wildcard anchors both ends",
        {"FileName": [{"wildcard": "dir/*.png"}]},
        {"FileName": "dir/b.png.bak"},
        False,
    ),
    ("ruler: * matches nothing too", {"c": [{"wildcard": "xy*"}]}, {"c": "xy"}, True),
    (
        "ruler: Simple*Service",
        {"source": [{"wildcard": "Simple*Service"}]},
        {"source": "SimpleQueueService"},
        True,
    ),
    ("several wildcards", {"a": [{"wildcard": "*bc*e"}]}, {"a": "abcde"}, True),
    ("wildcard is case-sensitive", {"source": [{"wildcard": "Simple*"}]}, {"source": "simpleQueue"}, False),
    ("regex characters are literal", {"a": [{"wildcard": "a.c*"}]}, {"a": "abc"}, False),
    (r"\* is a literal star", {"a": [{"wildcard": r"a\*b"}]}, {"a": "a*b"}, True),
    (r"\* does not match other characters", {"a": [{"wildcard": r"a\*b"}]}, {"a": "axb"}, False),
    (r"\\ is a literal backslash", {"a": [{"wildcard": "a\\\\*"}]}, {"a": "a\\anything"}, True),
    ("wildcard only matches strings", {"a": [{"wildcard": "1*"}]}, {"a": 12}, False),
]

OR: list[Case] = [
    (
        "operators: Location or Day, Day matches",
        {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]},
        {"Location": "Boston", "Day": "Monday"},
        True,
    ),
    (
        "Location or Day, neither",
        {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]},
        {"Location": "Boston", "Day": "Tuesday"},
        False,
    ),
    (
        "filtering: $or of numeric matches, d-count < 10",
        {
            "detail": {
                "$or": [
                    {"c-count": [{"numeric": [">", 0, "<=", 5]}]},
                    {"d-count": [{"numeric": ["<", 10]}]},
                    {"x-limit": [{"numeric": ["=", 3.018e2]}]},
                ]
            }
        },
        detail(**{"c-count": 50, "d-count": 3}),
        True,
    ),
    (
        "$or of numeric matches, none",
        {
            "detail": {
                "$or": [
                    {"c-count": [{"numeric": [">", 0, "<=", 5]}]},
                    {"d-count": [{"numeric": ["<", 10]}]},
                    {"x-limit": [{"numeric": ["=", 3.018e2]}]},
                ]
            }
        },
        detail(**{"c-count": 50, "d-count": 30, "x-limit": 1}),
        False,
    ),
    (
        "ruler: $or is ANDed with sibling fields",
        {
            "source": ["aws.cloudwatch"],
            "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}],
        },
        {"source": "aws.ec2", "namespace": "AWS/EC2"},
        False,
    ),
    (
        "ruler: $or with siblings, both sides hold",
        {
            "source": ["aws.cloudwatch"],
            "$or": [{"metricName": ["CPUUtilization"]}, {"namespace": ["AWS/EC2"]}],
        },
        {"source": "aws.cloudwatch", "namespace": "AWS/EC2"},
        True,
    ),
    (
        "ruler: a branch may have several fields (all must match)",
        {"$or": [{"metricName": ["CPU"]}, {"metricType": ["M"], "namespace": ["AWS/EC2"]}]},
        {"metricType": "M", "namespace": "AWS/ES"},
        False,
    ),
    (
        "ruler: nested $or",
        {"source": ["s"], "$or": [{"a": ["1"]}, {"b": ["2"], "$or": [{"c": [3]}, {"d": [4]}]}]},
        {"source": "s", "b": "2", "d": 4},
        True,
    ),
    (
        "ruler: two $or at different levels must both hold",
        {"$or": [{"m": ["x"]}, {"n": ["y"]}], "detail": {"$or": [{"source": ["s"]}, {"detail-type": ["t"]}]}},
        {"m": "x", "detail": {"source": "other"}},
        False,
    ),
    (
        "a branch and a sibling match within one array element",
        {"items": {"sku": ["A"]}, "$or": [{"items": {"quantity": [2]}}, {"rush": [True]}]},
        {"items": [{"sku": "A", "quantity": 1}, {"sku": "B", "quantity": 2}]},
        False,
    ),
]

RELAY_EVENT = {
    "source": "relay.orders",
    "detail-type": "OrderRejected",
    "detail": {
        "eventType": "OrderRejected",
        "ids": {"orderId": "o-1"},
        "payload": {
            "paymentOperationId": "op-1",
            "customerId": "c-1",
            "items": [{"sku": "A", "quantity": 2}],
        },
    },
}
RELAY_PATTERN = {
    "source": ["relay.orders"],
    "detail-type": ["OrderRejected"],
    "detail": {"payload": {"paymentOperationId": [{"exists": True}]}},
}


def without_payment_operation() -> dict[str, Any]:
    event = json.loads(json.dumps(RELAY_EVENT))
    del event["detail"]["payload"]["paymentOperationId"]
    return event


RELAY: list[Case] = [
    ("relay: a rejected order with a payment operation", RELAY_PATTERN, RELAY_EVENT, True),
    (
        "relay: a rejected order without a payment operation",
        RELAY_PATTERN,
        without_payment_operation(),
        False,
    ),
    ("relay: another detail type", RELAY_PATTERN, {**RELAY_EVENT, "detail-type": "OrderPlaced"}, False),
    (
        "relay: an item inside the payload",
        {"detail": {"payload": {"items": {"sku": ["A"], "quantity": [2]}}}},
        RELAY_EVENT,
        True,
    ),
    (
        "relay: an item quantity range",
        {"detail": {"payload": {"items": {"quantity": [{"numeric": [">", 2]}]}}}},
        RELAY_EVENT,
        False,
    ),
]

ALL_CASES = (
    BASICS
    + ARRAYS
    + PREFIX_SUFFIX_IGNORE_CASE
    + ANYTHING_BUT
    + NUMERIC
    + EXISTS
    + CIDR
    + WILDCARD
    + OR
    + RELAY
)


@pytest.mark.parametrize(("name", "pattern", "event", "expected"), ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_pattern_matches_as_eventbridge_does(
    name: str, pattern: dict[str, Any], event: dict[str, Any], expected: bool
) -> None:
    validate_pattern(pattern)
    assert pattern_matches(pattern, event) is expected
    assert pattern_matches(json.dumps(pattern), event) is expected  # PutRule's EventPattern is JSON text


def test_every_operator_has_a_matching_and_a_non_matching_case() -> None:
    for group in (PREFIX_SUFFIX_IGNORE_CASE, ANYTHING_BUT, NUMERIC, EXISTS, CIDR, WILDCARD, OR, RELAY):
        assert {expected for *_, expected in group} == {True, False}


def test_a_later_duplicate_key_overrides_an_earlier_one() -> None:
    # filtering: "if you include a key more than once the last reference will be the one used"
    text = '{"detail": {"location": [{"prefix": "us-"}], "location": [{"anything-but": "us-east"}]}}'
    assert pattern_matches(text, {"detail": {"location": "eu-west"}})
    assert not pattern_matches(text, {"detail": {"location": "us-east"}})


def test_compiled_patterns_are_cached_on_their_json_text() -> None:
    pattern = {"source": ["relay.orders"], "detail": {"ids": {"orderId": [{"prefix": "o-"}]}}}
    matcher = compile_pattern(pattern)
    assert compile_pattern(json.loads(json.dumps(pattern))) is matcher
    assert compile_pattern(json.dumps(pattern, separators=(",", ":"))) is matcher
    assert matcher(RELAY_EVENT)
    assert not matcher({**RELAY_EVENT, "source": "relay.payments"})


INVALID: list[tuple[str, Any, str]] = [
    ("not an object", ["source"], "Filter is not an object"),
    ("not JSON", "{source: [x]}", "Filter is not valid JSON"),
    ("NaN is not JSON", '{"n": [NaN]}', "Filter is not valid JSON"),
    ("a JSON string, not an object", '"source"', "Filter is not an object"),
    ("an empty pattern", {}, "Empty objects are not allowed"),
    ("an empty nested object", {"detail": {}}, "Empty objects are not allowed"),
    ("a bare string leaf", {"source": "aws.ec2"}, '"source" must be an object or an array'),
    ("a bare number leaf", {"detail": {"n": 5}}, '"n" must be an object or an array'),
    ("an empty list", {"source": []}, "Empty arrays are not allowed"),
    (
        "a list inside the list",
        {"source": [["aws.ec2"]]},
        "Match value must be String, number, true, false, or null",
    ),
    ("an empty operator object", {"source": [{}]}, "Match expression name not found"),
    ("two operators in one object", {"source": [{"prefix": "a", "suffix": "b"}]}, "Only one key allowed"),
    ("an unknown operator", {"source": [{"contains": "ec2"}]}, "Unrecognized match type contains"),
    ("an undocumented operator", {"source": [{"exactly": "ec2"}]}, "Unrecognized match type exactly"),
    ("a numeric prefix", {"source": [{"prefix": 5}]}, "prefix match pattern must be a string"),
    (
        "prefix with another option",
        {"source": [{"prefix": {"wildcard": "a"}}]},
        "Unsupported prefix pattern: wildcard",
    ),
    (
        "suffix ignore-case not a string",
        {"f": [{"suffix": {"equals-ignore-case": 1}}]},
        "equals-ignore-case match pattern must be a string",
    ),
    (
        "a list as equals-ignore-case",
        {"f": [{"equals-ignore-case": ["a"]}]},
        "equals-ignore-case match pattern must be a string",
    ),
    (
        "exists not a boolean",
        {"f": [{"exists": "true"}]},
        "exists match pattern must be either true or false.",
    ),
    ("numeric not a list", {"n": [{"numeric": ">"}]}, "Value of numeric must be an array."),
    ("numeric empty", {"n": [{"numeric": []}]}, "Invalid member in numeric match"),
    ("numeric starts with a number", {"n": [{"numeric": [5, ">"]}]}, "Invalid member in numeric match: 5"),
    ("numeric unknown operator", {"n": [{"numeric": ["!=", 5]}]}, "Unrecognized numeric range operator: !="),
    ("numeric string operand", {"n": [{"numeric": [">", "5"]}]}, "Value of > must be numeric"),
    ("numeric boolean operand", {"n": [{"numeric": ["=", True]}]}, "Value of equals must be numeric"),
    ("numeric missing operand", {"n": [{"numeric": ["<"]}]}, "Value of < must be numeric"),
    (
        "numeric = with a range",
        {"n": [{"numeric": ["=", 1, "<", 5]}]},
        "Too many elements in numeric expression",
    ),
    (
        "numeric range upper bound first",
        {"n": [{"numeric": ["<", 5, ">", 1]}]},
        "Too many elements in numeric expression",
    ),
    (
        "numeric range second operator",
        {"n": [{"numeric": [">", 1, ">", 5]}]},
        "Bad numeric range operator: >",
    ),
    ("numeric range second operand", {"n": [{"numeric": [">", 1, "<", "5"]}]}, "Value of < must be numeric"),
    ("numeric empty range", {"n": [{"numeric": [">", 5, "<=", 5]}]}, "Bottom must be less than top"),
    ("numeric too long", {"n": [{"numeric": [">", 0, "<", 5, "<", 9]}]}, "Too many terms in numeric range"),
    ("anything-but null", {"s": [{"anything-but": None}]}, "must be an array or single string/number value"),
    ("anything-but mixed list", {"s": [{"anything-but": ["a", 1]}]}, "mixed type is not supported"),
    ("anything-but empty list", {"s": [{"anything-but": []}]}, "mixed type is not supported"),
    (
        "anything-but list with null",
        {"s": [{"anything-but": ["a", None]}]},
        "start|null|boolean is not supported",
    ),
    (
        "anything-but exists",
        {"s": [{"anything-but": {"exists": True}}]},
        "Unsupported anything-but pattern: exists",
    ),
    (
        "anything-but numeric",
        {"s": [{"anything-but": {"numeric": [">", 1]}}]},
        "Unsupported anything-but pattern: numeric",
    ),
    (
        "anything-but empty prefix",
        {"s": [{"anything-but": {"prefix": ""}}]},
        "Null prefix/suffix not allowed",
    ),
    (
        "anything-but numeric suffix",
        {"s": [{"anything-but": {"suffix": 5}}]},
        "prefix/suffix match pattern must be a string",
    ),
    (
        "anything-but ignore-case numbers",
        {"s": [{"anything-but": {"equals-ignore-case": [1]}}]},
        "number|start|null|boolean is not supported",
    ),
    (
        "anything-but two options",
        {"s": [{"anything-but": {"prefix": "a", "suffix": "b"}}]},
        "Only one key allowed",
    ),
    ("wildcard not a string", {"s": [{"wildcard": 5}]}, "wildcard match pattern must be a string"),
    ("wildcard consecutive stars", {"s": [{"wildcard": "a**b"}]}, "Consecutive wildcard characters at pos 2"),
    ("wildcard bad escape", {"s": [{"wildcard": r"a\b"}]}, "Invalid escape character at pos 2"),
    ("wildcard trailing backslash", {"s": [{"wildcard": "a\\"}]}, "Invalid escape character"),
    (
        "anything-but wildcard consecutive stars",
        {"s": [{"anything-but": {"wildcard": ["ok*", "**"]}}]},
        "Consecutive wildcard characters",
    ),
    ("cidr not a string", {"ip": [{"cidr": 10}]}, "cidr match pattern must be a string"),
    ("cidr without a mask", {"ip": [{"cidr": "10.0.0.0"}]}, "Malformed CIDR, one '/' required"),
    ("cidr mask not a number", {"ip": [{"cidr": "10.0.0.0/x"}]}, "mask bits must be an integer"),
    ("cidr bad address", {"ip": [{"cidr": "10.0.0.300/24"}]}, "Invalid IP address: 10.0.0.300"),
    ("ruler: cidr IPv4 /32", {"ip": [{"cidr": "10.0.0.1/32"}]}, "IPv4 mask bits must be < 32"),
    ("cidr IPv4 mask too long", {"ip": [{"cidr": "10.0.0.0/33"}]}, "IPv4 mask bits must be < 32"),
    ("cidr negative mask", {"ip": [{"cidr": "10.0.0.0/-1"}]}, "mask bits must not be negative"),
    ("cidr IPv6 mask too long", {"ip": [{"cidr": "::/129"}]}, "IPv6 mask bits must be < 128"),
    ("$or not a list", {"$or": {"a": ["1"]}}, "It must be an Array followed with $or."),
    (
        "$or with one branch",
        {"$or": [{"a": ["1"]}]},
        "There must have at least 2 Objects in $or relationship.",
    ),
    ("$or with a non-object", {"$or": [{"a": ["1"]}, ["b"]]}, "Only JSON object is allowed in array of $or"),
    ("$or with an empty branch", {"$or": [{"a": ["1"]}, {}]}, "Empty objects are not allowed"),
    (
        "$or with an operator as a field",
        {"$or": [{"prefix": ["1"]}, {"b": ["2"]}]},
        "prefix is Ruler reserved",
    ),
    (
        "$or over 1000 combinations",
        {
            "a": {"$or": [{f"x{i}": [1]} for i in range(10)]},
            "b": {"$or": [{f"y{i}": [1]} for i in range(10)]},
            "c": {"$or": [{f"z{i}": [1]} for i in range(11)]},
        },
        f"over {MAX_OR_COMBINATIONS} rule combinations",
    ),
    (
        "a bad operator deep inside $or",
        {"$or": [{"a": ["1"]}, {"b": {"c": [{"numeric": ["<", "x"]}]}}]},
        "Value of < must be numeric",
    ),
]


@pytest.mark.parametrize(("name", "pattern", "reason"), INVALID, ids=[c[0] for c in INVALID])
def test_validate_pattern_rejects_what_put_rule_rejects(name: str, pattern: Any, reason: str) -> None:
    with pytest.raises(InvalidPattern) as caught:
        validate_pattern(pattern)
    assert reason in str(caught.value)
    assert isinstance(caught.value, ValueError)
    if isinstance(pattern, dict):
        with pytest.raises(InvalidPattern):
            pattern_matches(pattern, {"source": "x"})


def test_the_reason_names_where_in_the_pattern_it_is() -> None:
    with pytest.raises(InvalidPattern) as caught:
        validate_pattern({"detail": {"payload": {"amount": [{"numeric": [">", "5"]}]}}})
    assert caught.value.path == ("detail", "payload", "amount")
    assert "(at detail.payload.amount)" in str(caught.value)


def test_exactly_1000_or_combinations_are_allowed() -> None:
    pattern = {f"k{n}": {"$or": [{f"x{i}": [i]} for i in range(10)]} for n in range(3)}
    validate_pattern(pattern)  # 10 × 10 × 10
    assert pattern_matches(pattern, {"k0": {"x1": 1}, "k1": {"x2": 2}, "k2": {"x9": 9}})
    assert not pattern_matches(pattern, {"k0": {"x1": 1}, "k1": {"x2": 2}, "k2": {"x9": 8}})
