"""The archive search evaluation set (bench/search_eval.py), written for memlog (no outside data).

One long conversation per language between a player and the agent of a block-building survival world
(seed 004's users): 30 exchanges that hold facts, the same facts in English, French, Russian and
Chinese, among filler exchanges made from templates (daily chatter that shares the facts' vocabulary
of places and things, so they are real distractors). 24 questions per language ask about the facts
in the player's own words; `evidence` is the index of the fact exchange that answers. Whether a
question shares a word with its answer is computed by the benchmark, not claimed here.

Split: the English questions 0-11 were read while the stop words of projections/relevance.py were
written ("fit"); every other question was written before any run and never tuned on ("report").
"""

from __future__ import annotations

FACTS: dict[str, list[tuple[str, str]]] = {
    "en": [
        (
            "I hid the spare diamonds in a chest under the oak tree by the river.",
            "Noted: spare diamonds in the chest under the riverside oak.",
        ),
        (
            "The builder suggested a lava moat around the castle.",
            "A lava moat keeps mobs out, but watch for fire reaching the wooden gate.",
        ),
        (
            "My dog is called Biscuit and he sleeps in the kennel near the farm.",
            "Biscuit will stay safe in the kennel if you fence the farm.",
        ),
        (
            "We planted wheat and carrots in the north field today.",
            "Wheat and carrots grow faster with water within four blocks.",
        ),
        (
            "The nether portal is behind the waterfall at the mountain base.",
            "Light it with flint and steel; the waterfall hides it well.",
        ),
        (
            "I traded twenty emeralds with the librarian villager for a mending book.",
            "Mending is a great enchantment; put it on your pickaxe.",
        ),
        (
            "A creeper blew up the east wall of the library last night.",
            "Rebuild the wall with stone bricks; obsidian would resist explosions.",
        ),
        ("My sister Maya is visiting the server next weekend.", "I will set up a guest bed for Maya in the lodge."),
        (
            "The password for the iron door is the redstone lever on the left.",
            "The left lever opens the iron door; the right one triggers the alarm.",
        ),
        (
            "I am allergic to cats in real life, so no cats in the house please.",
            "Understood, I will keep ocelots away from the house.",
        ),
        (
            "We found an ancient city deep below the birch forest.",
            "Ancient cities have wardens; bring wool to sneak quietly.",
        ),
        (
            "The horse named Thunder needs a saddle and golden carrots.",
            "Golden carrots heal Thunder and help breeding.",
        ),
        (
            "I moved the enchanting table to the top floor of the tower.",
            "Surround it with fifteen bookshelves for level thirty enchantments.",
        ),
        (
            "Our village bell rings when raiders approach from the swamp.",
            "A good alarm; the bell also makes raiders glow.",
        ),
        (
            "I buried a treasure map in the sand on the desert island.",
            "Mark the spot with a sandstone pillar so you find it again.",
        ),
        (
            "The sheep farm produces red, blue and white wool.",
            "You could dye more colours with flowers from the meadow.",
        ),
        ("My birthday is on the ninth of March.", "I will plan a cake on March ninth."),
        (
            "The mine entrance collapsed after the gravel fell.",
            "Clear the gravel with a shovel and prop the tunnel with planks.",
        ),
        ("I named my sword Dawnbreaker after the old game.", "Dawnbreaker deserves sharpness five."),
        (
            "We should build a lighthouse on the cliff to guide boats home at night.",
            "A beacon or glowstone on the cliff top would work as a lighthouse.",
        ),
        (
            "The fishing rod broke while catching salmon at the lake.",
            "Craft a new rod with three sticks and two strings.",
        ),
        (
            "I keep my potions of healing in the brewing room cellar.",
            "Potions last forever in a chest; the cellar is fine.",
        ),
        ("The bridge across the ravine is made of spruce logs.", "Spruce is sturdy; add railings so no one falls."),
        ("Lucas from school joined our team as the architect.", "Welcome Lucas; he can design the town hall."),
        ("My favourite food in the game is pumpkin pie.", "Pumpkin pie needs a pumpkin, sugar and an egg."),
        (
            "The villagers panic because zombies come at sunset.",
            "Lights around the houses stop zombies from spawning nearby.",
        ),
        (
            "I lost all my experience when I fell into the void in the End.",
            "Falling into the void loses the items too, sadly.",
        ),
        (
            "The greenhouse has glass walls and grows melons all winter.",
            "Glass lets light through; melons need a free block beside the stem.",
        ),
        (
            "I want to tame a parrot with seeds in the jungle.",
            "Parrots accept wheat, melon, pumpkin or beetroot seeds.",
        ),
        (
            "The train station uses powered rails between the two towns.",
            "Powered rails need a redstone torch every thirty-eight blocks.",
        ),
    ],
    "fr": [
        (
            "J'ai caché les diamants de réserve dans un coffre sous le chêne près de la rivière.",
            "Noté : diamants de réserve dans le coffre sous le chêne au bord de la rivière.",
        ),
        (
            "Le constructeur a proposé des douves de lave autour du château.",
            "Des douves de lave éloignent les monstres, mais attention au feu près du portail en bois.",
        ),
        (
            "Mon chien s'appelle Biscuit et il dort dans la niche près de la ferme.",
            "Biscuit sera en sécurité dans la niche si tu clôtures la ferme.",
        ),
        (
            "Nous avons planté du blé et des carottes dans le champ nord aujourd'hui.",
            "Le blé et les carottes poussent plus vite avec de l'eau à moins de quatre blocs.",
        ),
        (
            "Le portail du Nether est derrière la cascade au pied de la montagne.",
            "Allume-le avec un briquet ; la cascade le cache bien.",
        ),
        (
            "J'ai échangé vingt émeraudes avec le villageois bibliothécaire contre un livre de raccommodage.",
            "Raccommodage est un excellent enchantement ; mets-le sur ta pioche.",
        ),
        (
            "Un creeper a fait exploser le mur est de la bibliothèque hier soir.",
            "Reconstruis le mur en briques de pierre ; l'obsidienne résisterait aux explosions.",
        ),
        (
            "Ma sœur Maya vient sur le serveur le week-end prochain.",
            "Je préparerai un lit d'invité pour Maya dans le chalet.",
        ),
        (
            "Le mot de passe de la porte en fer, c'est le levier de redstone à gauche.",
            "Le levier de gauche ouvre la porte en fer ; celui de droite déclenche l'alarme.",
        ),
        (
            "Je suis allergique aux chats dans la vraie vie, donc pas de chats dans la maison.",
            "Compris, je garderai les ocelots loin de la maison.",
        ),
        (
            "Nous avons trouvé une cité antique très profond sous la forêt de bouleaux.",
            "Les cités antiques ont des gardiens ; prends de la laine pour te faufiler.",
        ),
        (
            "Le cheval nommé Tonnerre a besoin d'une selle et de carottes dorées.",
            "Les carottes dorées soignent Tonnerre et aident à l'élevage.",
        ),
        (
            "J'ai déplacé la table d'enchantement au dernier étage de la tour.",
            "Entoure-la de quinze bibliothèques pour les enchantements de niveau trente.",
        ),
        (
            "La cloche du village sonne quand des pillards arrivent du marais.",
            "Bonne alarme ; la cloche fait aussi briller les pillards.",
        ),
        (
            "J'ai enterré une carte au trésor dans le sable sur l'île du désert.",
            "Marque l'endroit avec un pilier de grès pour le retrouver.",
        ),
        (
            "L'élevage de moutons produit de la laine rouge, bleue et blanche.",
            "Tu pourrais teindre d'autres couleurs avec les fleurs de la prairie.",
        ),
        ("Mon anniversaire est le neuf mars.", "Je prévois un gâteau pour le neuf mars."),
        (
            "L'entrée de la mine s'est effondrée après la chute du gravier.",
            "Dégage le gravier avec une pelle et étaye le tunnel avec des planches.",
        ),
        (
            "J'ai appelé mon épée Briseaube d'après le vieux jeu.",
            "Briseaube mérite tranchant cinq.",
        ),
        (
            "On devrait construire un phare sur la falaise pour guider les bateaux la nuit.",
            "Une balise ou de la pierre lumineuse en haut de la falaise ferait un phare.",
        ),
        (
            "La canne à pêche s'est cassée en attrapant du saumon au lac.",
            "Fabrique une nouvelle canne avec trois bâtons et deux ficelles.",
        ),
        (
            "Je garde mes potions de soin dans la cave de la salle d'alchimie.",
            "Les potions se gardent pour toujours dans un coffre ; la cave convient.",
        ),
        (
            "Le pont au-dessus du ravin est fait de bûches de sapin.",
            "Le sapin est solide ; ajoute des rambardes pour que personne ne tombe.",
        ),
        (
            "Lucas de l'école a rejoint notre équipe comme architecte.",
            "Bienvenue Lucas ; il peut dessiner la mairie.",
        ),
        (
            "Mon plat préféré dans le jeu est la tarte à la citrouille.",
            "La tarte à la citrouille demande une citrouille, du sucre et un œuf.",
        ),
        (
            "Les villageois paniquent parce que les zombies viennent au coucher du soleil.",
            "Des lumières autour des maisons empêchent les zombies d'apparaître.",
        ),
        (
            "J'ai perdu toute mon expérience en tombant dans le vide de l'End.",
            "Tomber dans le vide fait aussi perdre les objets, hélas.",
        ),
        (
            "La serre a des murs de verre et fait pousser des melons tout l'hiver.",
            "Le verre laisse passer la lumière ; les melons ont besoin d'un bloc libre à côté de la tige.",
        ),
        (
            "Je veux apprivoiser un perroquet avec des graines dans la jungle.",
            "Les perroquets acceptent les graines de blé, de melon, de citrouille ou de betterave.",
        ),
        (
            "La gare utilise des rails propulseurs entre les deux villes.",
            "Les rails propulseurs ont besoin d'une torche de redstone tous les trente-huit blocs.",
        ),
    ],
    "ru": [
        (
            "Я спрятал запасные алмазы в сундуке под дубом у реки.",
            "Записал: запасные алмазы в сундуке под дубом на берегу реки.",
        ),
        (
            "Строитель предложил сделать ров с лавой вокруг замка.",
            "Ров с лавой не пустит мобов, но следи, чтобы огонь не дошёл до деревянных ворот.",
        ),
        (
            "Мою собаку зовут Бисквит, и она спит в будке возле фермы.",
            "Бисквит будет в безопасности в будке, если огородить ферму.",
        ),
        (
            "Сегодня мы посадили пшеницу и морковь на северном поле.",
            "Пшеница и морковь растут быстрее, если вода не дальше четырёх блоков.",
        ),
        (
            "Портал в Незер находится за водопадом у подножия горы.",
            "Зажги его огнивом; водопад хорошо его скрывает.",
        ),
        (
            "Я обменял двадцать изумрудов у жителя-библиотекаря на книгу починки.",
            "Починка отличное зачарование; наложи его на кирку.",
        ),
        (
            "Вчера вечером крипер взорвал восточную стену библиотеки.",
            "Отстрой стену из каменных кирпичей; обсидиан выдержал бы взрывы.",
        ),
        (
            "Моя сестра Майя приедет на сервер в следующие выходные.",
            "Я поставлю гостевую кровать для Майи в домике.",
        ),
        (
            "Пароль от железной двери это красный рычаг слева.",
            "Левый рычаг открывает железную дверь; правый включает тревогу.",
        ),
        (
            "В жизни у меня аллергия на кошек, так что никаких кошек в доме.",
            "Понял, буду держать оцелотов подальше от дома.",
        ),
        (
            "Мы нашли древний город глубоко под берёзовым лесом.",
            "В древних городах есть стражи; возьми шерсть, чтобы красться тихо.",
        ),
        (
            "Коню по кличке Гром нужно седло и золотая морковь.",
            "Золотая морковь лечит Грома и помогает разведению.",
        ),
        (
            "Я перенёс стол зачарований на верхний этаж башни.",
            "Поставь вокруг пятнадцать книжных полок для зачарований тридцатого уровня.",
        ),
        (
            "Колокол в деревне звонит, когда разбойники идут со стороны болота.",
            "Хорошая тревога; колокол ещё и подсвечивает разбойников.",
        ),
        (
            "Я закопал карту сокровищ в песке на пустынном острове.",
            "Отметь место столбом из песчаника, чтобы найти его снова.",
        ),
        (
            "Овечья ферма даёт красную, синюю и белую шерсть.",
            "Можно красить в другие цвета цветами с луга.",
        ),
        ("Мой день рождения девятого марта.", "Я запланирую торт на девятое марта."),
        (
            "Вход в шахту обвалился после того, как упал гравий.",
            "Убери гравий лопатой и укрепи тоннель досками.",
        ),
        (
            "Я назвал свой меч Рассветник в честь старой игры.",
            "Рассветник заслуживает остроты пятого уровня.",
        ),
        (
            "Надо построить маяк на утёсе, чтобы ночью лодки находили дорогу домой.",
            "Маяк или светящийся камень на вершине утёса подойдёт как маяк.",
        ),
        (
            "Удочка сломалась, когда я ловил лосося на озере.",
            "Сделай новую удочку из трёх палок и двух нитей.",
        ),
        (
            "Я храню зелья исцеления в подвале комнаты зельеварения.",
            "Зелья хранятся вечно в сундуке; подвал подойдёт.",
        ),
        (
            "Мост через овраг сделан из еловых брёвен.",
            "Ель прочная; добавь перила, чтобы никто не упал.",
        ),
        (
            "Лукас из школы присоединился к нашей команде как архитектор.",
            "Добро пожаловать, Лукас; он может спроектировать ратушу.",
        ),
        (
            "Моя любимая еда в игре это тыквенный пирог.",
            "Для тыквенного пирога нужны тыква, сахар и яйцо.",
        ),
        (
            "Жители паникуют, потому что зомби приходят на закате.",
            "Свет вокруг домов не даёт зомби появляться рядом.",
        ),
        (
            "Я потерял весь опыт, когда упал в пустоту в Энде.",
            "Падение в пустоту лишает и предметов, увы.",
        ),
        (
            "В теплице стеклянные стены, и там всю зиму растут арбузы.",
            "Стекло пропускает свет; арбузу нужен свободный блок рядом со стеблем.",
        ),
        (
            "Я хочу приручить попугая семенами в джунглях.",
            "Попугаи берут семена пшеницы, арбуза, тыквы или свёклы.",
        ),
        (
            "Вокзал использует электрические рельсы между двумя городами.",
            "Электрическим рельсам нужен красный факел каждые тридцать восемь блоков.",
        ),
    ],
    "zh": [
        ("我把备用的钻石藏在河边橡树下的箱子里。", "记下了：备用钻石在河边橡树下的箱子里。"),
        ("建筑师建议在城堡周围挖一条岩浆护城河。", "岩浆护城河能挡住怪物，但要小心火烧到木门。"),
        ("我的狗叫饼干，它睡在农场旁边的狗窝里。", "只要把农场围起来，饼干在狗窝里就很安全。"),
        ("今天我们在北边的田里种了小麦和胡萝卜。", "四格以内有水，小麦和胡萝卜长得更快。"),
        ("下界传送门在山脚瀑布的后面。", "用打火石点燃它；瀑布把它藏得很好。"),
        ("我用二十颗绿宝石跟图书管理员村民换了一本经验修补附魔书。", "经验修补是很好的附魔，放在镐子上吧。"),
        ("昨晚一只苦力怕炸掉了图书馆的东墙。", "用石砖重建墙壁；黑曜石能抵挡爆炸。"),
        ("我妹妹玛雅下个周末来服务器玩。", "我会在小屋里给玛雅准备一张客床。"),
        ("铁门的密码是左边的红石拉杆。", "左边的拉杆开铁门，右边的会触发警报。"),
        ("我现实中对猫过敏，所以房子里不要有猫。", "明白了，我会让豹猫远离房子。"),
        ("我们在白桦林深处的地下发现了一座远古城市。", "远古城市有监守者，带上羊毛悄悄潜行。"),
        ("名叫雷霆的马需要一个马鞍和金胡萝卜。", "金胡萝卜能治疗雷霆，也有助于繁殖。"),
        ("我把附魔台搬到了塔的顶层。", "在周围放十五个书架，就能附魔三十级。"),
        ("强盗从沼泽那边过来时，村里的钟就会响。", "很好的警报，钟声还会让强盗发光。"),
        ("我把一张藏宝图埋在沙漠岛的沙子里。", "用砂岩柱标记那个地方，以便再找到它。"),
        ("羊场产出红色、蓝色和白色的羊毛。", "你可以用草地上的花染出更多颜色。"),
        ("我的生日是三月九日。", "我会在三月九日准备一个蛋糕。"),
        ("砾石掉下来以后，矿井入口塌了。", "用铲子清理砾石，再用木板撑住隧道。"),
        ("我给我的剑取名叫破晓，来自那个老游戏。", "破晓值得附上锋利五。"),
        ("我们应该在悬崖上建一座灯塔，晚上给船指路回家。", "在悬崖顶上放信标或萤石就可以当灯塔。"),
        ("在湖边钓鲑鱼的时候，钓鱼竿断了。", "用三根木棍和两根线做一根新的钓竿。"),
        ("我把治疗药水放在酿造室的地窖里。", "药水放在箱子里永远不会坏，地窖没问题。"),
        ("峡谷上的桥是用云杉原木做的。", "云杉很结实，加上栏杆免得有人掉下去。"),
        ("学校的卢卡斯作为建筑设计者加入了我们的队伍。", "欢迎卢卡斯，他可以设计市政厅。"),
        ("我在游戏里最喜欢的食物是南瓜派。", "南瓜派需要南瓜、糖和鸡蛋。"),
        ("村民很慌张，因为僵尸在日落时出现。", "房子周围的灯光能阻止僵尸在附近生成。"),
        ("我在末地掉进虚空，失去了所有经验。", "掉进虚空也会失去物品，很遗憾。"),
        ("温室有玻璃墙，整个冬天都能种西瓜。", "玻璃让光透过；西瓜的茎旁边需要一个空格。"),
        ("我想在丛林里用种子驯服一只鹦鹉。", "鹦鹉接受小麦、西瓜、南瓜或甜菜的种子。"),
        ("火车站在两个城镇之间用动力铁轨。", "动力铁轨每三十八格需要一个红石火把。"),
    ],
}

# (question, index of the fact exchange that answers it), the same 24 in each language
QUESTIONS: dict[str, list[tuple[str, int]]] = {
    "en": [
        ("Where did I say I hid the spare diamonds?", 0),
        ("What did the builder suggest for the moat?", 1),
        ("What is my dog's name?", 2),
        ("Which crops did we plant in the north field?", 3),
        ("Where is the nether portal?", 4),
        ("What did I get from the librarian?", 5),
        ("What destroyed the library wall?", 6),
        ("Who is visiting next weekend?", 7),
        ("How do I open the iron door?", 8),
        ("When is my birthday?", 16),
        ("What is the horse called?", 11),
        ("What did I name my sword?", 18),
        ("Which pet animal must I stay away from?", 9),
        ("What did we discover underground?", 10),
        ("How are we warned when pillagers come?", 13),
        ("Where is the hidden pirate chart?", 14),
        ("Which shades of fleece come from our livestock?", 15),
        ("What blocked the way into the quarry?", 17),
        ("Who became the designer on our crew?", 23),
        ("What dessert do I like most?", 24),
        ("Where are the healing drinks stored?", 21),
        ("What happened when I dropped out of the world?", 26),
        ("How do people travel between the settlements?", 29),
        ("Where do the cantaloupes grow in the cold season?", 27),
    ],
    "fr": [
        ("Où ai-je dit que j'avais caché les diamants de réserve ?", 0),
        ("Qu'a proposé le constructeur pour les douves ?", 1),
        ("Comment s'appelle mon chien ?", 2),
        ("Qu'avons-nous planté dans le champ nord ?", 3),
        ("Où est le portail du Nether ?", 4),
        ("Qu'ai-je obtenu du bibliothécaire ?", 5),
        ("Qu'est-ce qui a détruit le mur de la bibliothèque ?", 6),
        ("Qui vient le week-end prochain ?", 7),
        ("Comment ouvrir la porte en fer ?", 8),
        ("Quand est mon anniversaire ?", 16),
        ("Comment s'appelle le cheval ?", 11),
        ("Quel nom ai-je donné à mon épée ?", 18),
        ("De quel animal de compagnie dois-je rester éloigné ?", 9),
        ("Qu'avons-nous découvert sous terre ?", 10),
        ("Comment sommes-nous prévenus quand les brigands approchent ?", 13),
        ("Où est le plan secret du pirate ?", 14),
        ("Quelles teintes de toison viennent de notre bétail ?", 15),
        ("Qu'est-ce qui a bloqué l'accès à la carrière ?", 17),
        ("Qui est devenu le concepteur de notre bande ?", 23),
        ("Quel dessert est-ce que j'aime le plus ?", 24),
        ("Où range-t-on les boissons qui guérissent ?", 21),
        ("Que s'est-il passé quand je suis sorti du monde ?", 26),
        ("Comment voyage-t-on entre les localités ?", 29),
        ("Où poussent les pastèques pendant la saison froide ?", 27),
    ],
    "ru": [
        ("Где, как я говорил, спрятаны запасные алмазы?", 0),
        ("Что строитель предложил насчёт рва?", 1),
        ("Как зовут мою собаку?", 2),
        ("Что мы посадили на северном поле?", 3),
        ("Где портал в Незер?", 4),
        ("Что я получил у библиотекаря?", 5),
        ("Что разрушило стену библиотеки?", 6),
        ("Кто приедет в следующие выходные?", 7),
        ("Как открыть железную дверь?", 8),
        ("Когда мой день рождения?", 16),
        ("Как зовут коня?", 11),
        ("Как я назвал свой меч?", 18),
        ("От какого домашнего питомца мне надо держаться подальше?", 9),
        ("Что мы обнаружили под землёй?", 10),
        ("Как нас предупреждают о набеге грабителей?", 13),
        ("Где спрятан пиратский план?", 14),
        ("Какого оттенка руно даёт наш скот?", 15),
        ("Что перекрыло путь в карьер?", 17),
        ("Кто стал проектировщиком в нашей бригаде?", 23),
        ("Какой десерт я люблю больше всего?", 24),
        ("Где лежат лечебные напитки?", 21),
        ("Что случилось, когда я выпал из мира?", 26),
        ("Как люди ездят между поселениями?", 29),
        ("Где дыни растут в холодное время года?", 27),
    ],
    "zh": [
        ("我说过把备用钻石藏在哪里了？", 0),
        ("建筑师对护城河有什么建议？", 1),
        ("我的狗叫什么名字？", 2),
        ("我们在北边的田里种了什么？", 3),
        ("下界传送门在哪里？", 4),
        ("我从图书管理员那里得到了什么？", 5),
        ("什么毁了图书馆的墙？", 6),
        ("下个周末谁要来？", 7),
        ("怎么打开铁门？", 8),
        ("我的生日是哪天？", 16),
        ("那匹马叫什么？", 11),
        ("我的剑叫什么名字？", 18),
        ("我必须远离哪种宠物？", 9),
        ("我们在底下找到了什么？", 10),
        ("袭击者来的时候我们怎么得到提醒？", 13),
        ("海盗的秘密图纸在哪？", 14),
        ("我们的牲畜出产哪些颜色的绒毛？", 15),
        ("什么挡住了采石场的路？", 17),
        ("谁成了我们团队的设计师？", 23),
        ("我最爱吃哪种甜点？", 24),
        ("治病的饮料放在哪儿？", 21),
        ("我从世界掉出去时发生了什么？", 26),
        ("人们怎样在聚居地之间往来？", 29),
        ("寒冷季节甜瓜长在哪里？", 27),
    ],
}

# Filler exchanges: a time, an activity and a place, combined; they share the facts' nouns.
FILLER: dict[str, dict[str, list[str]]] = {
    "en": {
        "time": ["This morning", "Yesterday", "Tonight", "After lunch", "Last week", "At dawn", "Today", "Later"],
        "act": [
            "I cleaned the chest room",
            "we walked the dog",
            "I repaired the wooden gate",
            "we fished",
            "I mined some stone",
            "we built a fence",
            "I read a book",
            "we chopped oak logs",
            "I crafted torches",
            "we explored a cave",
            "I fed the sheep",
            "we raced horses",
        ],
        "place": [
            "near the river",
            "by the castle",
            "at the farm",
            "in the library",
            "in the village",
            "on the mountain",
            "in the forest",
            "at the lake",
        ],
        "answer": ["Sounds fun.", "Nice work.", "Good to know.", "Great, keep going.", "All right."],
    },
    "fr": {
        "time": [
            "Ce matin",
            "Hier",
            "Ce soir",
            "Après le déjeuner",
            "La semaine dernière",
            "À l'aube",
            "Aujourd'hui",
            "Plus tard",
        ],
        "act": [
            "j'ai rangé la salle des coffres",
            "nous avons promené le chien",
            "j'ai réparé le portail en bois",
            "nous avons pêché",
            "j'ai miné de la pierre",
            "nous avons construit une clôture",
            "j'ai lu un livre",
            "nous avons coupé des bûches de chêne",
            "j'ai fabriqué des torches",
            "nous avons exploré une grotte",
            "j'ai nourri les moutons",
            "nous avons fait la course à cheval",
        ],
        "place": [
            "près de la rivière",
            "près du château",
            "à la ferme",
            "dans la bibliothèque",
            "au village",
            "sur la montagne",
            "dans la forêt",
            "au lac",
        ],
        "answer": ["Ça a l'air amusant.", "Beau travail.", "Bon à savoir.", "Super, continue.", "D'accord."],
    },
    "ru": {
        "time": [
            "Сегодня утром",
            "Вчера",
            "Сегодня вечером",
            "После обеда",
            "На прошлой неделе",
            "На рассвете",
            "Сегодня",
            "Потом",
        ],
        "act": [
            "я убрал комнату с сундуками",
            "мы выгуляли собаку",
            "я починил деревянные ворота",
            "мы рыбачили",
            "я добыл камень",
            "мы построили забор",
            "я читал книгу",
            "мы рубили дубовые брёвна",
            "я сделал факелы",
            "мы исследовали пещеру",
            "я покормил овец",
            "мы устроили скачки на конях",
        ],
        "place": [
            "у реки",
            "возле замка",
            "на ферме",
            "в библиотеке",
            "в деревне",
            "на горе",
            "в лесу",
            "на озере",
        ],
        "answer": ["Звучит весело.", "Хорошая работа.", "Полезно знать.", "Отлично, продолжай.", "Ладно."],
    },
    "zh": {
        "time": ["今天早上", "昨天", "今晚", "午饭后", "上周", "黎明时", "今天", "后来"],
        "act": [
            "我整理了放箱子的房间",
            "我们遛了狗",
            "我修好了木门",
            "我们去钓鱼了",
            "我挖了一些石头",
            "我们建了一道栅栏",
            "我读了一本书",
            "我们砍了橡木",
            "我做了火把",
            "我们探索了一个洞穴",
            "我喂了羊",
            "我们赛了马",
        ],
        "place": ["在河边", "在城堡旁", "在农场", "在图书馆", "在村子里", "在山上", "在森林里", "在湖边"],
        "answer": ["听起来很有趣。", "干得好。", "知道了。", "很好，继续。", "好的。"],
    },
}
