// One kafkajs group member, driven by tests/agents/groups/tracked.py: prints a JSON line
// per completed join ({"join": generation, "partitions": [...]}) and per processed batch
// ({"records": [[partition, offset], ...]}); SIGTERM disconnects it (commit and leave).
// kafkajs's own log (debug) goes to stderr, for the test's failure report.
const { Kafka, logLevel } = require('kafkajs');

const { BROKERS, TOPIC, GROUP, CLIENT_ID } = process.env;
const say = (line) => process.stdout.write(JSON.stringify(line) + '\n');
let generation = -1; // from the 'Received assignment' debug line: GROUP_JOIN lacks it

const logCreator = () => ({ namespace, level, log }) => {
  const { message, timestamp, ...extra } = log;
  if (message === 'Received assignment' && extra.groupId === GROUP) generation = extra.generationId;
  process.stderr.write(`${timestamp} ${CLIENT_ID} ${namespace} ${message} ${JSON.stringify(extra)}\n`);
};

const kafka = new Kafka({
  clientId: CLIENT_ID,
  brokers: BROKERS.split(','),
  logLevel: logLevel.DEBUG,
  logCreator,
  retry: { retries: 10, maxRetryTime: 2000 },
});
const consumer = kafka.consumer({
  groupId: GROUP,
  sessionTimeout: Number(process.env.SESSION_TIMEOUT_MS),
  heartbeatInterval: Number(process.env.HEARTBEAT_MS),
  rebalanceTimeout: Number(process.env.REBALANCE_TIMEOUT_MS),
  maxWaitTimeInMs: 100,
});
consumer.on(consumer.events.GROUP_JOIN, (e) => {
  say({ join: generation, member: e.payload.memberId, partitions: e.payload.memberAssignment[TOPIC] || [] });
});

let stopping = false;
process.on('SIGTERM', async () => {
  if (stopping) return;
  stopping = true;
  try {
    await consumer.disconnect();
  } finally {
    say({ closed: true });
    process.exit(0);
  }
});

(async () => {
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  await consumer.run({
    autoCommitThreshold: 1, // commit after every message: nothing replays on a rebalance
    eachBatch: async ({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary }) => {
      const got = [];
      for (const message of batch.messages) {
        got.push([batch.partition, Number(message.offset)]);
        resolveOffset(message.offset);
      }
      say({ records: got });
      await commitOffsetsIfNecessary();
      await heartbeat();
    },
  });
})().catch((err) => {
  say({ error: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
