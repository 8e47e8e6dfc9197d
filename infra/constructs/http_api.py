"""HTTP API: API Gateway HTTP API in front of one Lambda function, with Relay's defaults.

- every route requires IAM (SigV4) authorization unless it is given another authorizer explicitly
  (`routes_with_authorizer`, e.g. the API-key Lambda authorizer an API destination calls through);
- the `$default` stage writes JSON access logs to its own log group (the stage's log retention and
  removal policy), and throttles (`defaults.HTTP_APIS`);
- the function is a `RelayFunction` (runtime, layers, logs, own role) and gets nothing else by default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs import defaults
from infra.constructs.function import RelayFunction, log_retention
from infra.constructs.naming import Naming

ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "caller": "$context.identity.caller",
    "user": "$context.identity.user",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "integrationError": "$context.integrationErrorMessage",
}


class HttpApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        naming: Naming,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
        handler: RelayFunction,
        routes: Sequence[tuple[apigw.HttpMethod, str]],
        authorizer: apigw.IHttpRouteAuthorizer | None = None,
        routes_with_authorizer: Sequence[tuple[apigw.HttpMethod, str, apigw.IHttpRouteAuthorizer]] = (),
        throttle_rate: int = defaults.HTTP_APIS.throttle_rate,
        throttle_burst: int = defaults.HTTP_APIS.throttle_burst,
    ) -> None:
        """`log_retention_days` and `removal_policy` are the access-log group's."""
        super().__init__(scope, construct_id)
        self.api = apigw.HttpApi(
            self,
            "Api",
            api_name=naming(name),
            create_default_stage=False,
            default_authorizer=authorizer or authorizers.HttpIamAuthorizer(),
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=log_retention(log_retention_days),
            removal_policy=removal_policy,
        )
        self.stage = apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
        )
        cfn_stage = self.stage.node.default_child
        assert isinstance(cfn_stage, apigw.CfnStage)
        cfn_stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn, format=json.dumps(ACCESS_LOG_FORMAT)
        )
        integration = integrations.HttpLambdaIntegration("Integration", handler.function)
        for method, path in routes:
            self.api.add_routes(path=path, methods=[method], integration=integration)
        for method, path, route_authorizer in routes_with_authorizer:
            self.api.add_routes(
                path=path, methods=[method], integration=integration, authorizer=route_authorizer
            )

    @property
    def url(self) -> str:
        return f"https://{self.api.api_id}.execute-api.{Stack.of(self).region}.amazonaws.com"
