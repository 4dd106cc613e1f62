// The consumer-group scenario with kafkajs (run by test_kafkajs.py from tests/js):
// three consumers share the partitions while a producer writes, a fourth joins, one
// leaves; prints the records each consumer processed and how long each rebalance took.
const { Kafka, logLevel } = require('kafkajs');

const { BOOTSTRAP, TOPIC, GROUP } = process.env;
const PARTITIONS = Number(process.env.PARTITIONS || 6);
const kafka = new Kafka({ clientId: 'kafkajs-group', brokers: [BOOTSTRAP], logLevel: logLevel.NOTHING });

const records = [];
const produced = [];
const joins = {}; // consumer name -> { at, partitions } of its latest completed join
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(predicate, ms, what) {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(50);
  }
  return (Date.now() - started) / 1000;
}

// Every named consumer completed a join since `since`, and together they hold each
// partition exactly once.
function balanced(names, since) {
  const held = names.map((n) => joins[n]);
  if (held.some((j) => !j || j.at < since || j.partitions.length === 0)) return false;
  const all = held.flatMap((j) => j.partitions);
  return all.length === PARTITIONS && new Set(all).size === PARTITIONS;
}

async function start(name) {
  const consumer = kafka.consumer({
    groupId: GROUP,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    rebalanceTimeout: 15000,
    maxWaitTimeInMs: 100,
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    joins[name] = { at: Date.now(), partitions: e.payload.memberAssignment[TOPIC] || [] };
  });
  await consumer.connect();
  await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
  await consumer.run({
    autoCommitThreshold: 1, // commit after every message: nothing replays on a rebalance
    eachMessage: async ({ partition, message }) => {
      records.push([partition, Number(message.offset)]);
    },
  });
  return consumer;
}

(async () => {
  const producer = kafka.producer();
  await producer.connect();
  let producing = true;
  let n = 0;
  const writer = (async () => {
    while (producing) {
      const messages = Array.from({ length: 12 }, () => ({ value: `m${n}`, partition: n++ % PARTITIONS }));
      const acks = await producer.send({ topic: TOPIC, acks: -1, messages });
      for (const ack of acks) {
        const count = messages.filter((m) => m.partition === ack.partition).length;
        for (let i = 0; i < count; i++) produced.push([ack.partition, Number(ack.baseOffset) + i]);
      }
      await sleep(100);
    }
  })();

  const names = ['js-0', 'js-1', 'js-2'];
  const consumers = {};
  for (const name of names) consumers[name] = await start(name);
  await waitFor(() => balanced(names, 0), 30000, 'three consumers share the partitions');

  let since = Date.now();
  consumers['js-3'] = await start('js-3');
  names.push('js-3');
  const joinS = (Date.now() - since) / 1000 + (await waitFor(() => balanced(names, since), 6000, 'rebalance after a join'));

  since = Date.now();
  await consumers['js-1'].disconnect();
  names.splice(names.indexOf('js-1'), 1);
  const leaveS = (Date.now() - since) / 1000 + (await waitFor(() => balanced(names, since), 6000, 'rebalance after a leave'));

  producing = false;
  await writer;
  await producer.disconnect();
  const key = ([p, o]) => `${p}:${o}`;
  await waitFor(() => {
    const seen = new Set(records.map(key));
    return produced.every((r) => seen.has(key(r)));
  }, 30000, 'every produced record consumed');
  for (const name of names) await consumers[name].disconnect();
  console.log(JSON.stringify({ records, produced, join_s: joinS, leave_s: leaveS }));
})().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
