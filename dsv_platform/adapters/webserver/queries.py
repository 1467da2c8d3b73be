"""The GraphQL documents :mod:`graphql` sends (Dagster 1.13's webserver schema)."""

JOBS = """{ repositoriesOrError { __typename
  ... on RepositoryConnection { nodes { name location { name } pipelines { name } } }
  ... on PythonError { message } } }"""

LAUNCH_RUN = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId status } }
  ... on RunConfigValidationInvalid { errors { message } }
  ... on Error { message } } }"""

_ERROR = "className message causes { className message }"
_METADATA = """label __typename ... on TextMetadataEntry { text } ... on IntMetadataEntry { intRepr }
  ... on FloatMetadataEntry { floatValue } ... on BoolMetadataEntry { boolValue } ... on JsonMetadataEntry { jsonString }"""

POLL = f"""query($runId: ID!, $after: String) {{
  runOrError(runId: $runId) {{ __typename ... on Run {{ status }} ... on Error {{ message }} }}
  logsForRun(runId: $runId, afterCursor: $after) {{ __typename
    ... on EventConnection {{ cursor hasMore events {{ __typename
      ... on MessageEvent {{ message level stepKey }}
      ... on MaterializationEvent {{ assetKey {{ path }} partition metadataEntries {{ {_METADATA} }} }}
      ... on AssetCheckEvaluationEvent {{ evaluation {{ checkName assetKey {{ path }} success }} }}
      ... on ExecutionStepFailureEvent {{ error {{ {_ERROR} }} }}
      ... on RunFailureEvent {{ error {{ {_ERROR} }} }} }} }}
    ... on Error {{ message }} }} }}"""
